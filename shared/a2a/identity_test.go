package a2a

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestValidIdentity(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{name: "letters", in: "bob", want: true},
		{name: "mixed", in: "Ops_Agent-01", want: true},
		{name: "single character", in: "a", want: true},
		{name: "64 characters", in: strings.Repeat("a", 64), want: true},
		{name: "empty", in: "", want: false},
		{name: "65 characters", in: strings.Repeat("a", 65), want: false},
		{name: "dot", in: "ops.agent", want: false},
		{name: "star", in: "*", want: false},
		{name: "greater than", in: ">", want: false},
		{name: "space", in: "ops agent", want: false},
		{name: "trailing newline", in: "bob\n", want: false},
		{name: "tab", in: "bob\t", want: false},
		{name: "slash", in: "ops/agent", want: false},
		{name: "non-ASCII letter", in: "bjørn", want: false},
		{name: "NUL", in: "bob\x00", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidIdentity(tt.in); got != tt.want {
				t.Errorf("ValidIdentity(%q): got %v, want %v", tt.in, got, tt.want)
			}
			err := CheckIdentity(tt.in)
			if tt.want && err != nil {
				t.Errorf("CheckIdentity(%q): got %v, want nil", tt.in, err)
			}
			if !tt.want {
				if !errors.Is(err, ErrInvalidIdentity) {
					t.Errorf("CheckIdentity(%q): got %v, want %v", tt.in, err, ErrInvalidIdentity)
				} else if !strings.Contains(err.Error(), IdentityPattern) {
					t.Errorf("CheckIdentity(%q): got %q, want it to name the pattern", tt.in, err)
				}
			}
		})
	}
}

// TestValidIdentityMatchesPattern checks the hand-written check against the
// pattern itself, compiled as a regexp, on every short string over an
// alphabet of allowed and refused bytes, and on lengths around the limit.
func TestValidIdentityMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(IdentityPattern)
	alphabet := []string{"a", "Z", "0", "9", "_", "-", ".", " ", "\n", "ø", "\x00", "`", "{", "@", "[", "/", ":"}
	check := func(s string) {
		if got, want := ValidIdentity(s), re.MatchString(s); got != want {
			t.Errorf("ValidIdentity(%q): got %v, the pattern says %v", s, got, want)
		}
	}
	check("")
	for _, a := range alphabet {
		for _, b := range alphabet {
			check(a)
			check(a + b)
			check("x" + a + b)
		}
	}
	for n := 60; n <= 70; n++ {
		check(strings.Repeat("a", n))
		check(strings.Repeat("a", n-1) + ".")
	}
}
