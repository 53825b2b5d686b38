package metadata

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCheckScramOps: Kafka's per-credential errors, in request order on a
// scratch image, which is never changed in place.
func TestCheckScramOps(t *testing.T) {
	cred := ScramCredential{Salt: []byte("s"), Iterations: 4096, StoredKey: []byte("k"), ServerKey: []byte("v")}
	im := NewImage()
	ApplyScramOp(im, ScramOp{User: "alice", Mechanism: "SCRAM-SHA-256", Cred: cred})
	before := im.Scram
	ops := []ScramOp{
		{User: "bob", Mechanism: "SCRAM-SHA-512", Cred: cred},
		{User: "bob", Mechanism: "SCRAM-SHA-512", Delete: true},
		{User: "bob", Mechanism: "SCRAM-SHA-512", Delete: true},
		{User: "", Mechanism: "SCRAM-SHA-256", Cred: cred},
		{User: "c", Mechanism: "SCRAM-SHA-1", Cred: cred},
		{User: "c", Mechanism: "SCRAM-SHA-256", Cred: ScramCredential{Salt: []byte("s"), Iterations: 20000, StoredKey: []byte("k"), ServerKey: []byte("v")}},
		{User: "alice", Mechanism: "SCRAM-SHA-256", Delete: true},
	}
	want := []*kerr.Error{nil, nil, kerr.ResourceNotFound, kerr.UnacceptableCredential, kerr.UnsupportedSaslMechanism, kerr.UnacceptableCredential, nil}
	for i, err := range CheckScramOps(im, ops) {
		if (want[i] == nil) != (err == nil) || (err != nil && !errors.Is(err, want[i])) {
			t.Errorf("op %d: %v, want %v", i, err, want[i])
		}
	}
	if _, ok := im.ScramCredentialOf("alice", "SCRAM-SHA-256"); !ok || len(before) != 1 || len(im.Scram) != 1 {
		t.Error("CheckScramOps changed the image")
	}
	c := im.Clone()
	ApplyScramOp(c, ScramOp{User: "alice", Mechanism: "SCRAM-SHA-256", Delete: true})
	if _, ok := im.ScramCredentialOf("alice", "SCRAM-SHA-256"); !ok || len(c.Scram) != 0 {
		t.Error("ApplyScramOp on a clone changed the original")
	}
}
