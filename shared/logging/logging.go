// Package logging builds the slog logger both services use: human-readable
// text for a terminal, JSON lines for production log pipelines.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Formats accepted by [New].
const (
	FormatText = "text"
	FormatJSON = "json"
)

// New returns a logger writing to w in format ("text" or "json") at level
// ("debug", "info", "warn", "error").
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case FormatText, "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// Flags are the logging flags both services embed in their kong CLI.
type Flags struct {
	LogFormat string `help:"Log format: text (for a terminal) or json (for production)." default:"text" enum:"text,json" env:"FISKFLEET_LOG_FORMAT"`
	LogLevel  string `help:"Log level: debug, info, warn or error." default:"info" enum:"debug,info,warn,error" env:"FISKFLEET_LOG_LEVEL"`
}

// Logger builds the logger the flags describe.
func (f Flags) Logger(w io.Writer) (*slog.Logger, error) { return New(w, f.LogFormat, f.LogLevel) }
