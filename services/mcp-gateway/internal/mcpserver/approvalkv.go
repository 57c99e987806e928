package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// approvalKeyPrefix starts the keys of pending approvals in a fleet's
// bucket, beside the tasks' keys.
const approvalKeyPrefix = "approval."

// noncePattern is what [newNonce] draws: a nonce that does not match was
// never issued and is not looked up.
var noncePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// bucketApprovals keeps pending approvals in a fleet's key-value bucket,
// so that the retry of a 2026-07-28 client, which the balancer may send to
// any gateway, is honoured by whichever it reaches. Each key expires by
// itself with the approval timeout (a per-key ttl), so a client that never
// retries leaves nothing behind; redeeming deletes the key at the revision
// read, so of two retries racing on two gateways only one runs the
// command.
type bucketApprovals struct {
	kv  jetstream.KeyValue
	ttl time.Duration
	now func() time.Time
}

// bucketApproval is the value of an approval's key.
type bucketApproval struct {
	Tool    string    `json:"tool"`
	Digest  []byte    `json:"digest"`
	Expires time.Time `json:"expires"`
}

func (a *bucketApprovals) issue(ctx context.Context, tool string, d [sha256.Size]byte) (string, error) {
	nonce, err := newNonce()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(bucketApproval{Tool: tool, Digest: d[:], Expires: a.now().Add(a.ttl)})
	if err != nil {
		return "", fmt.Errorf("encoding an approval: %w", err)
	}
	// The key outlives the approval by a little: an expired approval is
	// then reported as expired, not unknown.
	if _, err := a.kv.Create(ctx, approvalKeyPrefix+nonce, b, jetstream.KeyTTL(a.ttl+time.Minute)); err != nil {
		return "", fmt.Errorf("recording the approval in the fleet's bucket: %w", err)
	}
	return nonce, nil
}

func (a *bucketApprovals) redeem(ctx context.Context, nonce, tool string, d [sha256.Size]byte) error {
	if !noncePattern.MatchString(nonce) {
		return errApprovalUnknown
	}
	key := approvalKeyPrefix + nonce
	e, err := a.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return errApprovalUnknown
	}
	if err != nil {
		return fmt.Errorf("reading the approval from the fleet's bucket: %w", err)
	}
	// Spent whatever the outcome; only the one delete at this revision
	// wins a race between two retries.
	if err := a.kv.Purge(ctx, key, jetstream.LastRevision(e.Revision())); err != nil {
		return errApprovalUnknown
	}
	var p bucketApproval
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return errApprovalUnknown
	}
	switch {
	case !a.now().Before(p.Expires):
		return fmt.Errorf("%w: it was valid for %s", errApprovalExpired, a.ttl)
	case p.Tool != tool || string(p.Digest) != string(d[:]):
		return errApprovalMismatch
	}
	return nil
}
