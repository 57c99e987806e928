package approval

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nkeys"
)

// An answer signed with the approver's nkey proves who answered: an
// instance that lists approvers' public keys ([Config.Signers]) takes only
// answers whose signature verifies against one of them, and names the
// approver by that key's listed name, never by the name the answer claims.
// The signature covers what decides the request (identity, instance, id,
// digest, decision), the reason and the name the answer gives (which a
// delegate's key vouches for), so it cannot be moved to another request,
// another set of arguments or the other decision.

// signedPrefix starts every signed payload, so that a signature made for
// an approval answer is never one of anything else.
const signedPrefix = "fiskfleet approval answer v1"

// signedPayload is what an answer to req signs.
func signedPayload(identity, instance string, a AnswerMessage) []byte {
	return []byte(strings.Join([]string{signedPrefix, identity, instance, a.ID, a.Digest, a.Decision, a.Reason, a.Approver}, "\n"))
}

// sign sets a's key and signature, signing as kp for the request of
// identity and instance.
func sign(kp nkeys.KeyPair, identity, instance string, a *AnswerMessage) error {
	pub, err := kp.PublicKey()
	if err != nil {
		return err
	}
	sig, err := kp.Sign(signedPayload(identity, instance, *a))
	if err != nil {
		return err
	}
	a.Key, a.Signature = pub, base64.RawURLEncoding.EncodeToString(sig)
	return nil
}

// Errors of [verify], each a refusal of its own.
var (
	errUnsigned      = errors.New("unsigned")
	errUnknownSigner = errors.New("unknown signer")
	errBadSignature  = errors.New("bad signature")
)

// verify checks a's signature for the request of identity and instance
// against signers and returns who answered: as recorded (the key's
// holder, or for a delegate's key the name it signed for, with the
// key's), and the name the four-eyes rule compares (the holder, or the
// name a delegate vouched for).
func verify(signers map[string]Signer, identity, instance string, a AnswerMessage) (recorded, who string, err error) {
	if a.Key == "" || a.Signature == "" {
		return "", "", errUnsigned
	}
	signer, ok := signers[a.Key]
	if !ok {
		return "", "", fmt.Errorf("%w: %s", errUnknownSigner, a.Key)
	}
	kp, err := nkeys.FromPublicKey(a.Key)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", errBadSignature, err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(a.Signature)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", errBadSignature, err)
	}
	if err := kp.Verify(signedPayload(identity, instance, a), sig); err != nil {
		return "", "", fmt.Errorf("%w: %v", errBadSignature, err)
	}
	if signer.Delegate && a.Approver != "" {
		return cut(a.Approver+" via "+signer.Name, 256), a.Approver, nil
	}
	return signer.Name, signer.Name, nil
}

// ParseSigner reads an approver's nkey seed (a user seed, SU..., as nsc
// and nk write it, alone or in a decorated creds-style file).
func ParseSigner(seed []byte) (nkeys.KeyPair, error) {
	kp, err := nkeys.ParseDecoratedNKey(seed)
	if err != nil {
		return nil, fmt.Errorf("reading the approver's nkey seed: %w", err)
	}
	if pub, err := kp.PublicKey(); err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return nil, errors.New("reading the approver's nkey seed: it is not a user seed (SU...)")
	}
	return kp, nil
}
