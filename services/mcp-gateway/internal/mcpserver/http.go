package mcpserver

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// buildHandler mounts mcp-go's streamable server at /mcp behind the body
// cap and, when a token is configured, the bearer check (outermost, so an
// unauthenticated body is never read).
func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.streamable)
	h := limitBody(mux, s.cfg.MaxBodyBytes)
	if s.cfg.AuthToken != "" {
		h = requireBearer(h, s.cfg.AuthToken)
	}
	return h
}

// requireBearer answers 401 with a WWW-Authenticate challenge unless the
// request carries "Authorization: Bearer <token>". The comparison is
// constant-time over digests, so neither the token's content nor its length
// leaks through timing.
func requireBearer(next http.Handler, token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp-gateway"`)
			http.Error(w, "unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody answers 413 for a POST body over max bytes. mcp-go reads the
// whole body before it looks at it, so without the cap a client could make
// it buffer any amount; reading it here also lets the answer be a plain 413
// rather than a JSON-RPC parse error.
func limitBody(next http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			tooLarge(w, max)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				tooLarge(w, max)
				return
			}
			http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter, max int64) {
	http.Error(w, fmt.Sprintf("request body larger than %d bytes", max), http.StatusRequestEntityTooLarge)
}
