package main

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file makes the binary payloads (a PNG pixel, a short silent WAV) that
// tools, resources and prompts return.

var (
	pixelPNG  = makePNG()
	silentWAV = makeWAV(8000, 80)
)

func pngImage() *mcp.ImageContent {
	return &mcp.ImageContent{Data: pixelPNG, MIMEType: "image/png"}
}

func embeddedText(uri, s string) *mcp.EmbeddedResource {
	return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: "text/plain", Text: s}}
}

// makePNG encodes a single red pixel.
func makePNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 0xff, A: 0xff})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// makeWAV builds a mono 16-bit PCM WAV file of the given number of silent
// samples.
func makeWAV(rate, samples uint32) []byte {
	dataLen := samples * 2
	header := struct {
		Riff       [4]byte
		Size       uint32
		Wave, Fmt  [4]byte
		FmtLen     uint32
		Format     uint16
		Channels   uint16
		Rate       uint32
		ByteRate   uint32
		BlockAlign uint16
		Bits       uint16
		Data       [4]byte
		DataLen    uint32
	}{
		Riff: [4]byte{'R', 'I', 'F', 'F'}, Size: 36 + dataLen,
		Wave: [4]byte{'W', 'A', 'V', 'E'}, Fmt: [4]byte{'f', 'm', 't', ' '},
		FmtLen: 16, Format: 1, Channels: 1, Rate: rate, ByteRate: rate * 2, BlockAlign: 2, Bits: 16,
		Data: [4]byte{'d', 'a', 't', 'a'}, DataLen: dataLen,
	}
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, header); err != nil {
		panic(err)
	}
	buf.Write(make([]byte, dataLen))
	return buf.Bytes()
}
