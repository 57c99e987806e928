package buildinfo_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/fiskfleet/fiskfleet/shared/buildinfo"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name                  string
		version, commit, date string
		want                  buildinfo.Info
	}{
		{"unstamped", "", "", "", buildinfo.Info{Version: "0.0.0", Commit: "unknown", Date: "unknown"}},
		{"dev placeholder", "dev", "", "", buildinfo.Info{Version: "0.0.0", Commit: "unknown", Date: "unknown"}},
		{"release", "1.2.3", "abc123", "2026-12-03T08:00:00Z", buildinfo.Info{Version: "1.2.3", Commit: "abc123", Date: "2026-12-03T08:00:00Z"}},
		{"tag with v", "v1.2.3-4-gabcdef", "abc123", "2026-12-03T08:00:00Z", buildinfo.Info{Version: "1.2.3-4-gabcdef", Commit: "abc123", Date: "2026-12-03T08:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := buildinfo.New(tt.version, tt.commit, tt.date)
			tt.want.Go = runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStringFirstLine(t *testing.T) {
	got, _, _ := strings.Cut(buildinfo.New("1.2.3", "abc", "2026-12-03T08:00:00Z").String("a2a-agent"), "\n")
	if want := "a2a-agent 1.2.3"; got != want {
		t.Errorf("got first line %q, want %q", got, want)
	}
}

func ExampleInfo_String() {
	i := buildinfo.New("v1.2.3", "f4ce390", "2026-12-03T08:00:00Z")
	i.Go = "go1.26.8 linux/amd64" // fixed for the example's output
	fmt.Println(i.String("mcp-gateway"))
	// Output:
	// mcp-gateway 1.2.3
	// commit: f4ce390
	// built:  2026-12-03T08:00:00Z
	// go:     go1.26.8 linux/amd64
}
