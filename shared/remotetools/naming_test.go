package remotetools

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/a2a"
	"github.com/fiskfleet/fiskfleet/shared/tool"
)

func desc(names ...string) []a2a.ToolDescriptor {
	out := make([]a2a.ToolDescriptor, len(names))
	for i, n := range names {
		out[i] = a2a.ToolDescriptor{Name: n, Description: "does " + n, InputSchema: []byte(`{"type":"object"}`)}
	}
	return out
}

func locals(named []Named) map[string]string {
	out := map[string]string{}
	for _, n := range named {
		out[n.Host+"/"+n.Remote] = n.Local
	}
	return out
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name         string
		local        []string
		hosts        []HostTools
		want         map[string]string
		wantCollided []string
		wantInvalid  []string
	}{
		{
			name:  "bare names when unique",
			hosts: []HostTools{{Host: "ops", Tools: desc("status", "logs")}},
			want:  map[string]string{"ops/status": "status", "ops/logs": "logs"},
		},
		{
			name:  "prefix on local collision",
			local: []string{"status"},
			hosts: []HostTools{{Host: "ops", Tools: desc("status", "logs")}},
			want:  map[string]string{"ops/status": "ops_status", "ops/logs": "logs"},
		},
		{
			name: "symmetric prefix when two hosts share a name",
			hosts: []HostTools{
				{Host: "east", Tools: desc("status", "east_only")},
				{Host: "west", Tools: desc("status")},
			},
			want: map[string]string{"east/status": "east_status", "west/status": "west_status", "east/east_only": "east_only"},
		},
		{
			name: "both dropped on residual collision",
			// a_b on host "x" is prefixed to x_a_b (two hosts expose a_b);
			// host "x_a" exposes b, also prefixed... to x_a_b.
			hosts: []HostTools{
				{Host: "x", Tools: desc("a_b")},
				{Host: "y", Tools: desc("a_b")},
				{Host: "x_a", Tools: desc("b")},
				{Host: "z", Tools: desc("b")},
			},
			want:         map[string]string{"y/a_b": "y_a_b", "z/b": "z_b"},
			wantCollided: []string{"x/a_b", "x_a/b"},
		},
		{
			name:         "remote final name equal to a local name is dropped, local kept",
			local:        []string{"ops_status", "status"},
			hosts:        []HostTools{{Host: "ops", Tools: desc("status")}},
			want:         map[string]string{},
			wantCollided: []string{"ops/status"},
		},
		{
			name:        "prefixed name over 64 characters is dropped with a reason",
			local:       []string{strings.Repeat("t", 60)},
			hosts:       []HostTools{{Host: "host", Tools: desc(strings.Repeat("t", 60))}},
			want:        map[string]string{},
			wantInvalid: []string{"host/" + strings.Repeat("t", 60)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			named, collided, invalid := Resolve(tt.local, tt.hosts)
			if got := locals(named); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("names: got %v, want %v", got, tt.want)
			}
			if got := droppedNames(collided); !slices.Equal(got, tt.wantCollided) {
				t.Errorf("collided: got %v, want %v", got, tt.wantCollided)
			}
			if got := droppedNames(invalid); !slices.Equal(got, tt.wantInvalid) {
				t.Errorf("invalid: got %v, want %v", got, tt.wantInvalid)
			}
			for _, n := range named {
				if n.Tool.Name != n.Remote {
					t.Errorf("%s: wire name got %q, want the remote's own %q", n.Local, n.Tool.Name, n.Remote)
				}
			}
		})
	}
}

// TestResolveDeterministic is a property test: the same hosts and tools in
// any order give the same names and the same drops.
func TestResolveDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"status", "logs", "deploy", "restart", "info", "ls", "rm", "a_b", "b"}
	for round := range 200 {
		var hosts []HostTools
		for h := range 1 + r.IntN(5) {
			var names []string
			for _, w := range words {
				if r.IntN(2) == 0 {
					names = append(names, w)
				}
			}
			hosts = append(hosts, HostTools{Host: fmt.Sprintf("h%d", h), Tools: desc(names...)})
		}
		if r.IntN(3) == 0 {
			hosts = append(hosts, HostTools{Host: "h0_a", Tools: desc("b")})
		}
		local := []string{"info"}
		wantNamed, wantCollided, wantInvalid := Resolve(local, hosts)

		for range 5 {
			shuffled := slices.Clone(hosts)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for i := range shuffled {
				tools := slices.Clone(shuffled[i].Tools)
				r.Shuffle(len(tools), func(a, b int) { tools[a], tools[b] = tools[b], tools[a] })
				shuffled[i].Tools = tools
			}
			gotNamed, gotCollided, gotInvalid := Resolve(local, shuffled)
			if !reflect.DeepEqual(gotNamed, wantNamed) || !reflect.DeepEqual(gotCollided, wantCollided) || !reflect.DeepEqual(gotInvalid, wantInvalid) {
				t.Fatalf("round %d: order changed the outcome:\n got %v %v %v\nwant %v %v %v", round, locals(gotNamed), gotCollided, gotInvalid, locals(wantNamed), wantCollided, wantInvalid)
			}
		}
		// Every served local name is unique and not a local tool's.
		seen := map[string]bool{"info": true}
		for _, n := range wantNamed {
			if seen[n.Local] {
				t.Fatalf("round %d: name %q served twice", round, n.Local)
			}
			seen[n.Local] = true
		}
	}
}

func droppedNames(ds []tool.Dropped) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

func ExampleResolve() {
	named, _, _ := Resolve([]string{"status"}, []HostTools{
		{Host: "east", Tools: desc("status", "logs")},
		{Host: "west", Tools: desc("logs")},
	})
	for _, n := range named {
		fmt.Println(n.Host, n.Remote, "->", n.Local)
	}
	// Output:
	// east logs -> east_logs
	// east status -> east_status
	// west logs -> west_logs
}

func TestSplitTags(t *testing.T) {
	tests := []struct {
		in       string
		wantDesc string
		wantTags []string
	}{
		{"Echo a message\n\nTags: impact:ro, demo", "Echo a message", []string{"impact:ro", "demo"}},
		{"Tags: impact:rw", "", []string{"impact:rw"}},
		{"no tags here", "no tags here", nil},
		{"Mentions Tags: inline\nthen more", "Mentions Tags: inline\nthen more", nil},
	}
	for _, tt := range tests {
		d, tags := splitTags(tt.in)
		if d != tt.wantDesc || !slices.Equal(tags, tt.wantTags) {
			t.Errorf("splitTags(%q): got %q %v, want %q %v", tt.in, d, tags, tt.wantDesc, tt.wantTags)
		}
	}
}
