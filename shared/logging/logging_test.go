package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name, format, level string
		wantErr             string
		check               func(t *testing.T, out string)
	}{
		{name: "text", format: "text", level: "info", check: func(t *testing.T, out string) {
			if !strings.Contains(out, "msg=hello") || !strings.Contains(out, "agent=demo") {
				t.Errorf("got %q, want text with msg=hello agent=demo", out)
			}
		}},
		{name: "json", format: "json", level: "info", check: func(t *testing.T, out string) {
			var m map[string]any
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("got %q, want one JSON object: %v", out, err)
			}
			if m["msg"] != "hello" || m["agent"] != "demo" {
				t.Errorf("got %v, want msg hello and agent demo", m)
			}
		}},
		{name: "level filters", format: "text", level: "error", check: func(t *testing.T, out string) {
			if out != "" {
				t.Errorf("got %q, want nothing below error", out)
			}
		}},
		{name: "bad format", format: "xml", level: "info", wantErr: "log format"},
		{name: "bad level", format: "text", level: "loud", wantErr: "log level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := New(&buf, tt.format, tt.level)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info("hello", "agent", "demo")
			tt.check(t, buf.String())
		})
	}
}
