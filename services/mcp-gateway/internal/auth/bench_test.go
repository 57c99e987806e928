package auth_test

import (
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/oidctest"
)

// BenchmarkVerify is what the token check costs one request: the same
// token, as a client sends it on every request of a session.
func BenchmarkVerify(b *testing.B) {
	p := oidctest.Start(b, oidctest.Config{})
	g := startGateway(b, p, nil, nil)
	token := p.Mint(p.Claims(g.resource, scope))
	for !g.v.Ready() {
		if _, err := g.v.Verify(b.Context(), token); err == nil {
			break
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.v.Verify(b.Context(), token); err != nil {
			b.Fatal(err)
		}
	}
}
