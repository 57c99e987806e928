package a2a

import "fmt"

// IdentityPattern is the rule for agent identities and instance names. It
// keys NATS subjects and the queue group, so it admits no '.', '*', '>' or
// whitespace: a name can never inject a subject token. schemas/v1/common.json
// states the same pattern, and a test keeps the two equal.
const IdentityPattern = `^[a-zA-Z0-9_-]{1,64}$`

// ValidIdentity reports whether name matches [IdentityPattern]. It checks
// the pattern without a compiled regexp: the bounded repetition compiles to
// a program of some 60 KB, held by every process from start to end.
func ValidIdentity(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CheckIdentity returns an error wrapping [ErrInvalidIdentity] when name
// does not match [IdentityPattern].
func CheckIdentity(name string) error {
	if !ValidIdentity(name) {
		return fmt.Errorf("%w: %q does not match %s", ErrInvalidIdentity, name, IdentityPattern)
	}
	return nil
}
