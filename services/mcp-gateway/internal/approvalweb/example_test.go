package approvalweb_test

import (
	"log/slog"
	"net/http"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/fiskfleet/fiskfleet/services/mcp-gateway/internal/approvalweb"
)

// A gateway without OAuth gives each approver of approvals.approvers a
// token of their own, and mounts the page beside /mcp, outside its token
// check and behind its Origin check.
func ExampleNew() {
	var nc *nats.Conn // the gateway's connection (nats_context)
	page, err := approvalweb.New(approvalweb.Config{
		NATS:   nc,
		Logger: slog.Default(),
		Tokens: []approvalweb.Token{
			{Name: "alice", Token: os.Getenv("APPROVER_ALICE_TOKEN")},
			{Name: "bob", Token: os.Getenv("APPROVER_BOB_TOKEN")},
		},
	})
	if err != nil {
		return // the error names what to fix
	}
	defer page.Close() // before the connection closes
	open := map[string]http.Handler{
		"/approvals":  page.Handler(),
		"/approvals/": page.Handler(),
	}
	_ = open // mcpserver.Config.Open
}

func ExampleConfig_Validate() {
	err := approvalweb.Config{}.Validate()
	_, _ = os.Stdout.WriteString(err.Error() + "\n")
	// Output:
	// invalid approvals page config: no NATS connection: the page lists and answers requests over the gateway's nats_context
}
