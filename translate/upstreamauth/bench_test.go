package upstreamauth

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkTokenFirst is a first call of a principal: one exchange at a
// local token endpoint (loopback HTTP, form encoding, JSON decoding).
func BenchmarkTokenFirst(b *testing.B) {
	srv, _ := endpoint(b, 200, `{"access_token":"x-SUBJECT","token_type":"Bearer","expires_in":3600}`)
	e, _ := New(Config{TokenEndpoint: srv.URL, ClientID: "gw", ClientSecret: "s3cret", Audience: "srv", MaxEntries: 1})
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := e.Token(ctx, "p", "t"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokenCached is a later call of the same principal and token.
func BenchmarkTokenCached(b *testing.B) {
	srv, n := endpoint(b, 200, `{"access_token":"x-SUBJECT","token_type":"Bearer","expires_in":3600}`)
	e, _ := New(Config{TokenEndpoint: srv.URL, ClientID: "gw", ClientSecret: "s3cret", Audience: "srv"})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Token(ctx, "p", "t"); err != nil {
			b.Fatal(err)
		}
	}
	if n.Load() != 1 {
		b.Fatalf("%d exchanges", n.Load())
	}
}
