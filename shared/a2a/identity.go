package a2a

import (
	"fmt"
	"regexp"
)

// IdentityPattern is the rule for agent identities and instance names. It
// keys NATS subjects and the queue group, so it admits no '.', '*', '>' or
// whitespace: a name can never inject a subject token. schemas/v1/common.json
// states the same pattern, and a test keeps the two equal.
const IdentityPattern = `^[a-zA-Z0-9_-]{1,64}$`

var identityRE = regexp.MustCompile(IdentityPattern)

// ValidIdentity reports whether name matches [IdentityPattern].
func ValidIdentity(name string) bool { return identityRE.MatchString(name) }

// CheckIdentity returns an error wrapping [ErrInvalidIdentity] when name
// does not match [IdentityPattern].
func CheckIdentity(name string) error {
	if !ValidIdentity(name) {
		return fmt.Errorf("%w: %q does not match %s", ErrInvalidIdentity, name, IdentityPattern)
	}
	return nil
}
