package fleettest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/natstest"
)

// Home is a private configuration home for child processes: its Dir is
// their XDG_CONFIG_HOME, so the nats contexts written into it are the only
// ones the children (and the nats CLI) see.
type Home struct {
	// Dir is the directory children get as XDG_CONFIG_HOME; contexts live
	// in Dir/nats/context. It is removed at the end of the test.
	Dir string
}

// NewHome returns an empty home in a temporary directory of tb.
func NewHome(tb testing.TB) *Home {
	tb.Helper()
	return &Home{Dir: tb.TempDir()}
}

// AddContext writes a nats context called name for srv into the home, as
// `nats context add` would. extra adds context fields such as "user",
// "password" or "creds".
func (h *Home) AddContext(tb testing.TB, srv *natstest.Server, name string, extra map[string]string) {
	tb.Helper()
	srv.WriteContext(tb, h.Dir, name, extra)
}

// AddClusterContext writes a nats context called name whose url lists
// every server of servers, in order, as an operator writes a cluster into
// a context ("nats://127.0.0.1:p1,nats://127.0.0.1:p2"). A client picks
// among them and learns the rest of the cluster from whichever it reaches;
// a context of a single server places a process on that server. extra
// adds fields as in [Home.AddContext].
func (h *Home) AddClusterContext(tb testing.TB, name string, servers []*natstest.Server, extra map[string]string) {
	tb.Helper()
	natstest.WriteURLContext(tb, h.Dir, name, natstest.URLs(servers...), extra)
}

// inheritedSettings are variables of the test's own environment that would
// change what a child does behind the test's back: the selected nats
// context, the config file and log settings the services read from the
// environment.
var inheritedSettings = []string{
	"XDG_CONFIG_HOME",
	"XDG_CACHE_HOME",
	"NATS_CONTEXT",
	"NATS_URL",
	"A2A_AGENT_CONFIG",
	"A2A_AGENT_DRAIN_TIMEOUT",
	"FISKFLEET_LOG_FORMAT",
	"FISKFLEET_LOG_LEVEL",
}

// Env returns the environment for a child: the test process's own, with
// XDG_CONFIG_HOME set to Dir and the variables that select a nats context,
// a config file or log settings removed, then extra ("NAME=value") added.
func (h *Home) Env(extra ...string) []string {
	env := make([]string, 0, len(os.Environ())+len(extra)+1)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !contains(inheritedSettings, name) {
			env = append(env, kv)
		}
	}
	env = append(env, "XDG_CONFIG_HOME="+h.Dir, "XDG_CACHE_HOME="+filepath.Join(h.Dir, "cache"))
	return append(env, extra...)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
