package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestAddrPolicyRefuses(t *testing.T) {
	def, err := parseAddrPolicy(defaultRefused)
	if err != nil {
		t.Fatal(err)
	}
	withPrivate, err := parseAddrPolicy([]string{"private", "203.0.113.0/24", "198.51.100.7"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		policy *addrPolicy
		addr   string
		want   string // "" accepted
	}{
		{def, "127.0.0.1", "loopback"},
		{def, "127.3.2.1", "loopback"},
		{def, "::1", "loopback"},
		{def, "::ffff:127.0.0.1", "loopback"},
		{def, "64:ff9b::7f00:1", "loopback"},
		{def, "169.254.169.254", "link_local"},
		{def, "::ffff:169.254.169.254", "link_local"},
		{def, "fe80::1%eth0", "link_local"},
		{def, "fd00:ec2::254", "metadata"},
		{def, "168.63.129.16", "metadata"},
		{def, "100.100.100.200", "metadata"},
		{def, "0.0.0.0", "unspecified"},
		{def, "::", "unspecified"},
		{def, "10.0.0.7", ""},
		{def, "192.168.1.1", ""},
		{def, "93.184.215.14", ""},
		{def, "2606:4700::1", ""},
		{withPrivate, "10.0.0.7", "private"},
		{withPrivate, "172.31.255.1", "private"},
		{withPrivate, "fd12::1", "private"},
		{withPrivate, "100.64.0.1", "private"},
		{withPrivate, "203.0.113.9", "203.0.113.0/24"},
		{withPrivate, "198.51.100.7", "198.51.100.7"},
		{withPrivate, "198.51.100.8", ""},
		{withPrivate, "127.0.0.1", ""},
		{nil, "169.254.169.254", ""},
	}
	for _, c := range cases {
		got, refused := c.policy.refuses(netip.MustParseAddr(c.addr))
		if got != c.want || refused != (c.want != "") {
			t.Errorf("%s: refused %v by %q, want %q", c.addr, refused, got, c.want)
		}
	}
	for _, bad := range [][]string{{"nowhere"}, {"10.0.0.0/33"}, {"none", "loopback"}} {
		if _, err := parseAddrPolicy(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if p, err := parseAddrPolicy([]string{"none"}); err != nil || len(p.ranges) != 0 {
		t.Errorf("none: %v %v", p, err)
	}
}

func TestSourceOnLoopback(t *testing.T) {
	cases := map[string]bool{
		`{"source":"srv","name":"x","resolver":{"addresses":["127.0.0.1:5353"]}}`:                     true,
		`{"source":"a","name":"x","port":"80","resolver":{"addresses":["udp/[::1]:53","localhost"]}}`: true,
		`{"source":"srv","name":"x","resolver":{"addresses":["127.0.0.1:53","10.0.0.53"]}}`:           false,
		`{"source":"srv","name":"x"}`:                   false,
		`{"source":"a","name":"localhost","port":"80"}`: false,
		`{"source":"multi","sources":[{"source":"srv","name":"x","resolver":{"addresses":["127.0.0.1"]}}]}`:                                      true,
		`{"source":"multi","sources":[{"source":"srv","name":"x","resolver":{"addresses":["127.0.0.1"]}},{"source":"a","name":"y","port":"1"}]}`: false,
		`{"source":"multi"}`: false,
		`{"source":"other"}`: false,
	}
	for raw, want := range cases {
		if got := sourceOnLoopback([]byte(raw)); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
}

// TestGuardDial: a connection to a watched host:port that reached a
// refused address is closed and reported as a failed dial; one to another
// host:port, or once no policy watches it, goes through.
func TestGuardDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	addr := "localhost:" + port
	dial := guardDial((&net.Dialer{}).DialContext)
	owner := &dynamicUpstreams{}
	p, _ := parseAddrPolicy([]string{"loopback"})
	dialGuards.watch(addr, owner, p)
	_, err = dial(context.Background(), "tcp", addr)
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" || !strings.Contains(err.Error(), "refused range") {
		t.Fatalf("dial of a watched loopback address: %v, want a refused dial", err)
	}
	if c, err := dial(context.Background(), "tcp", ln.Addr().String()); err != nil {
		t.Fatalf("dial of an address nobody watches: %v", err)
	} else {
		c.Close()
	}
	dialGuards.forget(addr, owner)
	if c, err := dial(context.Background(), "tcp", addr); err != nil {
		t.Fatalf("dial once forgotten: %v", err)
	} else {
		c.Close()
	}
	if dialGuards.watching(addr) {
		t.Fatal("still watched")
	}
}

func TestUnmarshalDynamicRefuse(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcp_gateway {\n dynamic a mcp.internal 3001\n dynamic_refuse loopback private 203.0.113.0/24\n}")); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(h.DynamicRefuse)
	if string(got) != `["loopback","private","203.0.113.0/24"]` {
		t.Fatalf("dynamic_refuse %s", got)
	}
	for input, want := range map[string]string{
		"mcp_gateway {\n dynamic_refuse\n}":                            "wrong argument count",
		"mcp_gateway {\n dynamic_refuse intranet\n}":                   "want loopback, link_local",
		"mcp_gateway {\n dynamic_refuse none private\n}":               `"none" goes alone`,
		"mcp_gateway {\n dynamic_refuse none\n dynamic_refuse none\n}": "dynamic_refuse already specified",
	} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", input, err, want)
		}
	}
}
