package integration_test

import (
	"testing"

	"github.com/fiskfleet/fiskfleet/integration/fleettest"
	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/a2a/natsbus"
	"github.com/fiskfleet/fiskfleet/shared/memtrim"
)

// trimLog is what an agent logs, at debug level, when it returns the
// memory a burst left behind (shared/memtrim).
const trimLog = "returned idle memory to the operating system"

// TestAgentTrimsAfterBurst serves a burst of calls and discoveries from a
// real agent, then lets it go quiet: within two of memtrim's periods it
// hands the burst's memory back (its anonymous memory falls), and it
// still serves afterwards. That a quiet agent trims once per burst, not
// again and again, is shared/memtrim's unit test.
func TestAgentTrimsAfterBurst(t *testing.T) {
	b := newBus(t)
	cfg := fleettest.WriteAgentConfig(t, b.demoAgent(t, "trim", 2))
	agent := fleettest.Start(t, b.home.Env("FISKFLEET_LOG_LEVEL=debug"), fleettest.A2AAgent(t), "serve", "--config", cfg)
	agent.WaitOutput(t, fleettest.A2AServingLog, fleettest.ReadyTimeout)

	tr := natsbus.NewTransport(b.ns.Connect(t))
	ac, err := a2a.NewClient(tr, a2a.Participant{Name: "trim-test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	call := func() {
		t.Helper()
		r, err := ac.CallTool(ctx, "trim", "echo", echoInput)
		if err != nil || r.IsError || r.Output != "hi\n" {
			t.Fatalf("echo: got %+v (%v), want output \"hi\\n\"", r, err)
		}
	}
	// Several MiB of allocation in the agent: far above memtrim's
	// churn, and enough to grow its heap past the runtime's smallest
	// goal.
	for range 100 {
		call()
	}
	for range 1500 {
		if _, err := ac.Discover(ctx, "trim"); err != nil {
			t.Fatalf("discovery: %v", err)
		}
	}
	burst := mustAnon(t, "a2a-agent", agent.PID)
	agent.WaitOutput(t, trimLog, 2*memtrim.DefaultPeriod+fleettest.ReadyTimeout)
	quiet := mustAnon(t, "a2a-agent", agent.PID)
	t.Logf("a2a-agent anonymous memory: %.2f MiB after the burst, %.2f MiB once trimmed", burst, quiet)
	if quiet >= burst {
		t.Errorf("anonymous memory: got %.2f MiB after the trim, want less than the %.2f MiB after the burst", quiet, burst)
	}
	call()
}
