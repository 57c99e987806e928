package call

import (
	"net/http"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/audit"
)

// TestUntracedCallAllocatesNoSpan: with no tracer, the span helpers of a
// call hand back the context unchanged and record nothing.
func TestUntracedCallAllocatesNoSpan(t *testing.T) {
	c := &Core{}
	r := &Request{Tool: "echo", Header: http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}
	ctx := t.Context()
	allocs := testing.AllocsPerRun(100, func() {
		got, span := c.startCall(ctx, r)
		if got != ctx || span.IsRecording() {
			t.Fatal("an untraced call got a recording span or a new context")
		}
		endCall(ctx, span, &record{outcome: audit.EndOK})
	})
	if allocs != 0 {
		t.Fatalf("got %v allocations per untraced call, want 0", allocs)
	}
}
