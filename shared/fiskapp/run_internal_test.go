package fiskapp

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

func TestShellQuote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
	}{
		{in: "", want: "''"},
		{in: "plain", want: "plain"},
		{in: "--flag=v,a:b/c.d@e%f+g", want: "--flag=v,a:b/c.d@e%f+g"},
		{in: "two words", want: "'two words'"},
		{in: "it's", want: `'it'\''s'`},
		{in: "$HOME", want: "'$HOME'"},
		{in: "a;rm -rf /", want: "'a;rm -rf /'"},
		{in: "glob*", want: "'glob*'"},
		{in: "new\nline", want: "'new\nline'"},
		{in: "ünï", want: "'ünï'"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := shellQuote(tt.in); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCapWriter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		limit         int
		writes        []string
		want          string
		wantTruncated bool
	}{
		{name: "under", limit: 10, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "exact", limit: 6, writes: []string{"abc", "def"}, want: "abcdef"},
		{name: "over in one write", limit: 4, writes: []string{"abcdef"}, want: "abcd", wantTruncated: true},
		{name: "over across writes", limit: 4, writes: []string{"abc", "def", "ghi"}, want: "abcd", wantTruncated: true},
		{name: "cut inside a character", limit: 4, writes: []string{"abc€"}, want: "abc", wantTruncated: true},
		{name: "invalid bytes replaced", limit: 10, writes: []string{"a\xffb"}, want: "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := &capWriter{limit: tt.limit}
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("got write %d, %v, want %d, nil", n, err, len(s))
				}
			}
			if got := w.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if got := w.dropped > 0; got != tt.wantTruncated {
				t.Errorf("got truncated %t, want %t", got, tt.wantTruncated)
			}
		})
	}
}

// FuzzCapWriter checks the output contract of any write sequence (odd
// chunk: through ReadFrom, as exec uses it): the first
// limit bytes are kept, the rest counted, and the text is valid UTF-8 that,
// for valid input, is a prefix of it no longer than the cap.
func FuzzCapWriter(f *testing.F) {
	f.Add([]byte("hello, wörld"), 5, 3)
	f.Add([]byte("€€€€"), 7, 2)
	f.Add([]byte("\xff\xfe"), 1, 1)
	f.Fuzz(func(t *testing.T, data []byte, limit, chunk int) {
		if limit < 1 || limit > 1<<16 || chunk < 1 {
			t.Skip()
		}
		w := &capWriter{limit: limit}
		if chunk%2 == 0 {
			for rest := data; len(rest) > 0; {
				n := min(chunk, len(rest))
				_, _ = w.Write(rest[:n])
				rest = rest[n:]
			}
		} else if n, err := w.ReadFrom(iotest.HalfReader(bytes.NewReader(data))); n != int64(len(data)) || err != nil {
			t.Fatalf("got ReadFrom %d, %v, want %d, nil", n, err, len(data))
		}
		if got, want := len(w.buf), min(limit, len(data)); got != want {
			t.Fatalf("got %d bytes kept, want %d", got, want)
		}
		if got, want := w.dropped, int64(len(data)-len(w.buf)); got != want {
			t.Fatalf("got %d bytes dropped, want %d", got, want)
		}
		s := w.String()
		if !utf8.ValidString(s) {
			t.Fatalf("got invalid UTF-8 %q", s)
		}
		if utf8.Valid(data) && (len(s) > limit || !strings.HasPrefix(string(data), s)) {
			t.Fatalf("got %q, want a prefix of the input of at most %d bytes", s, limit)
		}
	})
}
