package fleettest

import (
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/fisktest"
)

// Packages of the binaries [A2AAgent], [MCPGateway] and [FiskDemo] build.
const (
	A2AAgentPackage   = fisktest.A2AAgentPackage
	MCPGatewayPackage = fisktest.MCPGatewayPackage
	FiskDemoPackage   = fisktest.FiskDemoPackage
)

// Main runs the tests of m with the binaries built once per test binary
// and removed afterwards. Call it from TestMain:
//
//	func TestMain(m *testing.M) { fleettest.Main(m) }
func Main(m *testing.M) { fisktest.Main(m) }

// A2AAgent returns the path of the a2a-agent binary, building it on first
// use. Each binary is built on its own, so a test of one service does not
// depend on another service compiling.
func A2AAgent(tb testing.TB) string {
	tb.Helper()
	return fisktest.Build(tb, A2AAgentPackage, "a2a-agent")
}

// MCPGateway returns the path of the mcp-gateway binary, building it on
// first use.
func MCPGateway(tb testing.TB) string {
	tb.Helper()
	return fisktest.Build(tb, MCPGatewayPackage, "mcp-gateway")
}

// FiskDemo returns the path of the fiskdemo application, building it on
// first use.
func FiskDemo(tb testing.TB) string { tb.Helper(); return fisktest.FiskDemo(tb) }

// WorkspaceRoot returns the directory holding go.work.
func WorkspaceRoot() (string, error) { return fisktest.WorkspaceRoot() }

// NATSCLI returns the path of the real nats CLI that `make tools`
// installs, failing tb with that fix when it is missing.
func NATSCLI(tb testing.TB) string { tb.Helper(); return fisktest.NATSCLI(tb) }
