package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ScramCredential is a user's stored SCRAM credential for one mechanism
// (RFC 5802; Kafka's UserScramCredentialRecord): never the password, only
// what verifies it.
type ScramCredential struct {
	Salt       []byte `json:"salt"`
	Iterations int32  `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

// ScramOp is one change of AlterUserScramCredentials: an upsert of Cred,
// or a deletion.
type ScramOp struct {
	User      string          `json:"user"`
	Mechanism string          `json:"mechanism"` // SCRAM-SHA-256 or SCRAM-SHA-512
	Delete    bool            `json:"delete,omitempty"`
	Cred      ScramCredential `json:"cred,omitempty"`
}

// SCRAM limits (Kafka's ScramMechanism bounds, and a bound on users).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
	MaxScramUsers      = 100000
	maxScramUserLen    = 1024
)

// ScramCredentialOf returns a user's credential for a mechanism.
func (im *Image) ScramCredentialOf(user, mech string) (ScramCredential, bool) {
	c, ok := im.Scram[user][mech]
	return c, ok
}

// CheckScramOp checks an op against the image (Kafka's
// ControllerApis / ScramControlManager errors): the mechanism, the user
// name, the iterations, that a deleted credential exists and that the
// number of users stays bounded.
func CheckScramOp(im *Image, op ScramOp) error {
	switch {
	case op.Mechanism != "SCRAM-SHA-256" && op.Mechanism != "SCRAM-SHA-512":
		return fmt.Errorf("%w: unknown SCRAM mechanism", kerr.UnsupportedSaslMechanism)
	case op.User == "" || len(op.User) > maxScramUserLen:
		return fmt.Errorf("%w: the user name must have 1 to %d bytes", kerr.UnacceptableCredential, maxScramUserLen)
	case op.Delete:
		if _, ok := im.ScramCredentialOf(op.User, op.Mechanism); !ok {
			return fmt.Errorf("%w: attempt to delete a user credential that does not exist", kerr.ResourceNotFound)
		}
	case op.Cred.Iterations < MinScramIterations || op.Cred.Iterations > MaxScramIterations:
		return fmt.Errorf("%w: iterations must be in [%d, %d]", kerr.UnacceptableCredential, MinScramIterations, MaxScramIterations)
	case len(op.Cred.Salt) == 0 || len(op.Cred.StoredKey) == 0 || len(op.Cred.ServerKey) == 0:
		return fmt.Errorf("%w: empty salt or salted password", kerr.UnacceptableCredential)
	case im.Scram[op.User] == nil && len(im.Scram) >= MaxScramUsers:
		return fmt.Errorf("%w: at most %d SCRAM users", kerr.UnacceptableCredential, MaxScramUsers)
	}
	return nil
}

// ApplyScramOp applies a checked op to im, copying the maps it changes
// (images handed out are immutable).
func ApplyScramOp(im *Image, op ScramOp) {
	next := make(map[string]map[string]ScramCredential, len(im.Scram)+1)
	for u, m := range im.Scram {
		next[u] = m
	}
	user := make(map[string]ScramCredential, len(next[op.User])+1)
	for k, v := range next[op.User] {
		user[k] = v
	}
	if op.Delete {
		delete(user, op.Mechanism)
	} else {
		user[op.Mechanism] = op.Cred
	}
	if len(user) == 0 {
		delete(next, op.User)
	} else {
		next[op.User] = user
	}
	im.Scram = next
}

// ScramAlterer is a Controller that stores SCRAM credentials
// (AlterUserScramCredentials). Local and the Raft controller are.
type ScramAlterer interface {
	// AlterScramCredentials checks each op against the committed image
	// (CheckScramOp), commits the valid ones together, and returns one
	// error per op (nil: applied). The error return is for the call as a
	// whole (no controller).
	AlterScramCredentials(ctx context.Context, ops []ScramOp) ([]error, error)
}

// CheckScramOps checks ops in order on a scratch copy of im (a deletion
// may follow an upsert of the same request), applying each valid one to
// it. It returns the per-op errors.
func CheckScramOps(im *Image, ops []ScramOp) []error {
	scratch := *im
	errs := make([]error, len(ops))
	for i, op := range ops {
		if errs[i] = CheckScramOp(&scratch, op); errs[i] == nil {
			ApplyScramOp(&scratch, op)
		}
	}
	return errs
}

// AlterScramCredentials implements ScramAlterer.
func (l *Local) AlterScramCredentials(_ context.Context, ops []ScramOp) ([]error, error) {
	var errs []error
	err := l.store.Update(func(im *Image) error {
		errs = CheckScramOps(im, ops)
		for i, op := range ops {
			if errs[i] == nil {
				ApplyScramOp(im, op)
			}
		}
		return nil
	})
	return errs, err
}
