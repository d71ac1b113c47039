package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file holds the resources, the resource template, the watched
// resource's update ticker and the legacy not-found error.

const (
	watchedURI       = "test://watched-resource"
	templatePrefix   = "test://template/"
	templateSuffix   = "/data"
	legacyNotFound   = -32002 // the 2025 "resource not found" code
	notFoundMessage  = "Resource not found"
	watchedTickEvery = 3 * time.Second
)

func registerResources(server *mcp.Server) {
	server.AddResource(&mcp.Resource{URI: "test://static-text", Name: "static-text", Description: "A fixed text resource.", MIMEType: "text/plain"},
		textResource("text/plain", "Static text resource of the legacy fixture."))
	server.AddResource(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A fixed PNG resource.", MIMEType: "image/png"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
				{URI: req.Params.URI, MIMEType: "image/png", Blob: pixelPNG},
			}}, nil
		})
	server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: templatePrefix + "{id}" + templateSuffix, Name: "template", Description: "JSON data for the given id.", MIMEType: "application/json"},
		templateResource)
	server.AddResource(&mcp.Resource{URI: watchedURI, Name: "watched-resource", Description: "Reported as updated every 3 seconds to subscribers.", MIMEType: "text/plain"},
		textResource("text/plain", "Watched resource of the legacy fixture."))
}

func textResource(mimeType, s string) mcp.ResourceHandler {
	return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
			{URI: req.Params.URI, MIMEType: mimeType, Text: s},
		}}, nil
	}
}

// templateResource answers test://template/{id}/data with a JSON document
// naming the id.
func templateResource(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, templatePrefix)
	if ok {
		id, ok = strings.CutSuffix(id, templateSuffix)
	}
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, mcp.ResourceNotFoundError(uri) // rewritten to -32002 by legacyResourceNotFound
	}
	doc, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{
		{URI: uri, MIMEType: "application/json", Text: string(doc)},
	}}, nil
}

// updateWatchedResource tells the subscribers of the watched resource, every
// few seconds, that it changed.
func updateWatchedResource(ctx context.Context, server *mcp.Server) {
	tick := time.NewTicker(watchedTickEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: watchedURI})
		}
	}
}

// legacyResourceNotFound gives resources/read of an unknown URI the legacy
// error code -32002 (data {"uri": ...}) instead of go-sdk's 2026 default
// -32602, as a 2025-era server would.
func legacyResourceNotFound(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "resources/read" || err == nil {
			return res, err
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && werr.Code == mcp.CodeResourceNotFound && werr.Message == notFoundMessage {
			return nil, &jsonrpc.Error{Code: legacyNotFound, Message: notFoundMessage, Data: werr.Data}
		}
		return res, err
	}
}
