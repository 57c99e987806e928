package tool

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidNameMatchesPattern checks the hand-written check against the
// name pattern itself, compiled as a regexp, on every short string over an
// alphabet of allowed and refused bytes, and on lengths around the limit.
func TestValidNameMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(NamePattern())
	alphabet := []string{"a", "Z", "0", "9", "_", "-", ".", " ", "\n", "é", "\x00", "`", "{", "@", "[", "/", ":"}
	check := func(s string) {
		if got, want := ValidName(s), re.MatchString(s); got != want {
			t.Errorf("ValidName(%q): got %v, the pattern says %v", s, got, want)
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
		check(strings.Repeat("a", n-1) + "-")
		check(strings.Repeat("a", n-1) + "*")
	}
}
