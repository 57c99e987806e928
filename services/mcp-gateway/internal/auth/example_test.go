package auth_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/auth"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

// The metadata of a resource with a path lives under the well-known
// prefix followed by that path (RFC 9728); the bare prefix is served too.
func ExampleVerifier_MetadataURL() {
	v, err := auth.NewVerifier(context.Background(), auth.Config{
		// Nothing listens on port 1: discovery fails quietly in the
		// background, which NewVerifier does not wait for.
		Auth:     config.Auth{Issuer: "http://127.0.0.1:1"},
		Resource: "https://gateway.example:8443/mcp",
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer v.Close()
	fmt.Println(v.MetadataURL())
	fmt.Println(v.MetadataPaths())
	// Output:
	// https://gateway.example:8443/.well-known/oauth-protected-resource/mcp
	// [/.well-known/oauth-protected-resource/mcp /.well-known/oauth-protected-resource]
}
