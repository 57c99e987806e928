package mcphttp

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// RPCAnswer is a JSON-RPC response the gateway writes itself, beside
// mcp-go: a task method's, a rate refusal's. Its fields are those of
// mcp-go's response types, so the answers read alike.
type RPCAnswer struct {
	JSONRPC string                   `json:"jsonrpc"`
	ID      json.RawMessage          `json:"id"`
	Result  any                      `json:"result,omitempty"`
	Error   *mcp.JSONRPCErrorDetails `json:"error,omitempty"`
}

// contentJSON is the Content-Type of a JSON answer, shared rather than
// allocated per answer.
var contentJSON = []string{"application/json"}

// WriteResult writes the JSON-RPC result of the request id.
func WriteResult(w http.ResponseWriter, id json.RawMessage, result any) {
	WriteRPC(w, RPCAnswer{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: result})
}

// WriteError writes the JSON-RPC error of the request id (null for
// none).
func WriteError(w http.ResponseWriter, id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	WriteRPC(w, RPCAnswer{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Error: &mcp.JSONRPCErrorDetails{Code: code, Message: message}})
}

// WriteRPC writes a, setting the header pairs given (name, value, ...)
// besides its content type.
func WriteRPC(w http.ResponseWriter, a RPCAnswer, header ...string) {
	b, err := json.Marshal(a)
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h["Content-Type"] = contentJSON
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

// Clip shortens a hostile value for an error message.
func Clip(b []byte) string {
	const max = 64
	if len(b) > max {
		return string(bytes.ToValidUTF8(b[:max], nil)) + "..."
	}
	return string(b)
}
