package natsbus_test

import (
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
)

// cardDiscovery returns a discovery handler answering with card, as self:
// what the test agents here serve on their discovery endpoint.
func cardDiscovery(t *testing.T, card a2a.AgentCard, self a2a.Participant) func(*natsbus.Request) {
	t.Helper()
	cr, err := a2a.NewCardReply(card)
	if err != nil {
		t.Fatal(err)
	}
	return func(r *natsbus.Request) {
		req := &a2a.DiscoveryRequest{}
		if a2a.Decode(r.Data(), req) == nil {
			data, _ := cr.Reply(req, self)
			_ = r.Reply(data)
		}
	}
}
