package remotetools

import (
	"slices"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/config"
)

func TestHostsStatus(t *testing.T) {
	f := &fleet{cards: map[string][]a2a.ToolDescriptor{"demo": desc("echo")}}
	im := NewImporter(f, []config.RemoteHost{{Host: "demo"}, {Host: "ops"}}, nil)

	steps := []struct {
		name   string
		before func()
		want   []HostStatus
	}{
		{"before any discovery", nil, []HostStatus{{Host: "demo"}, {Host: "ops"}}},
		{"demo answers, ops has no agent", func() { im.Import(t.Context()) },
			[]HostStatus{{Host: "demo", Discovered: true, Reachable: true}, {Host: "ops"}}},
		{"ops comes up", func() { f.set("ops", desc("logs")); im.Import(t.Context()) },
			[]HostStatus{{Host: "demo", Discovered: true, Reachable: true}, {Host: "ops", Discovered: true, Reachable: true}}},
		{"demo goes away, still discovered once", func() { f.set("demo", nil); im.Import(t.Context()) },
			[]HostStatus{{Host: "demo", Discovered: true}, {Host: "ops", Discovered: true, Reachable: true}}},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		if got := im.Hosts(); !slices.Equal(got, st.want) {
			t.Errorf("%s: got %+v, want %+v", st.name, got, st.want)
		}
	}
}
