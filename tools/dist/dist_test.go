package dist_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fiskfleet/fiskfleet/tools/dist"
)

func TestParseTargets(t *testing.T) {
	tests := []struct {
		in      string
		want    []dist.Target
		wantErr bool
	}{
		{"linux/amd64", []dist.Target{{OS: "linux", Arch: "amd64"}}, false},
		{"linux/amd64, darwin/arm64", []dist.Target{{OS: "linux", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}}, false},
		{"linux", nil, true},
		{"/amd64", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := dist.ParseTargets(tt.in)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("got %v, %v; want %v, error %t", got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, dist.ErrInvalidConfig) {
				t.Errorf("got %v, want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	good := dist.Config{Root: ".", Out: "dist", Version: "1.2.3", Commit: "abc", Time: time.Unix(1, 0)}
	tests := []struct {
		name   string
		change func(*dist.Config)
	}{
		{"no root", func(c *dist.Config) { c.Root = "" }},
		{"no out", func(c *dist.Config) { c.Out = "" }},
		{"no version", func(c *dist.Config) { c.Version = "" }},
		{"leading v", func(c *dist.Config) { c.Version = "v1.2.3" }},
		{"no commit", func(c *dist.Config) { c.Commit = "" }},
		{"no time", func(c *dist.Config) { c.Time = time.Time{} }},
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("got %v for a complete config, want nil", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.change(&c)
			if err := c.Validate(); !errors.Is(err, dist.ErrInvalidConfig) {
				t.Errorf("got %v, want an error wrapping ErrInvalidConfig", err)
			}
		})
	}
}
