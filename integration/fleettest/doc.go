// Package fleettest runs fiskfleet's real binaries in end-to-end tests.
//
// It builds a2a-agent, mcp-gateway and the fiskdemo application once per
// test binary ([A2AAgent], [MCPGateway], [FiskDemo]; call [Main] from
// TestMain), finds the real nats CLI ([NATSCLI]), gives a test a private
// configuration home whose nats contexts point at an embedded server
// ([NewHome], [Home.AddContext], [Home.Env]), writes agent.yaml files
// ([Agent], [WriteAgentConfig]), and starts child processes whose output it
// captures and which it stops by PID when the test ends ([Start],
// [StartAgent], [Run]).
//
// The NATS server itself is shared/natstest's, running inside the test
// process on 127.0.0.1; children reach it only through the contexts in the
// home, exactly as an operator's processes reach theirs.
//
// A typical test:
//
//	ns := natstest.Start(t)
//	home := fleettest.NewHome(t)
//	home.AddContext(t, ns, "fleet", nil)
//	cfg := fleettest.WriteAgentConfig(t, fleettest.Agent{
//		Identity:        "demo",
//		ApplicationPath: fleettest.FiskDemo(t),
//		NATSContext:     "fleet",
//		A2A:             &fleettest.A2A{ServeTools: true},
//	})
//	agent := fleettest.StartAgent(t, home.Env(), cfg)
//	// ... call it with an a2a.Client over ns.Connect(t) ...
//	agent.Kill(t) // kill -9 by PID
//
// Nothing here uses a fixed port, the user's nats contexts or the user's
// configuration: every test is isolated and may run in parallel unless it
// sets process-wide environment itself. The package is imported only from
// _test.go files of the integration module.
package fleettest
