package metadata

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestApplyConfigOps(t *testing.T) {
	cur := map[string]string{"cleanup.policy": "delete", "retention.ms": "1000"}
	next, err := ApplyConfigOps(cur, []ConfigOp{
		{Name: "cleanup.policy", Op: 2, Value: "compact"}, // APPEND
		{Name: "retention.ms", Op: 1},                     // DELETE
		{Name: "segment.ms", Op: 0, Value: "60000"},       // SET
	})
	if err != nil || next["cleanup.policy"] != "delete,compact" || next["segment.ms"] != "60000" {
		t.Fatalf("%v %v", next, err)
	}
	if _, ok := next["retention.ms"]; ok || cur["retention.ms"] != "1000" {
		t.Fatal("DELETE must remove the key from a copy only")
	}
	next, _ = ApplyConfigOps(next, []ConfigOp{{Name: "cleanup.policy", Op: 3, Value: "delete"}}) // SUBTRACT
	if next["cleanup.policy"] != "compact" {
		t.Fatalf("subtract: %q", next["cleanup.policy"])
	}
	if _, err := ApplyConfigOps(cur, []ConfigOp{{Name: "retention.ms", Op: 2, Value: "1"}}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("APPEND to a non-list: %v", err)
	}
	if _, err := ApplyConfigOps(cur, []ConfigOp{{Name: "retention.ms", Op: 0, Value: "soon"}}); !errors.Is(err, kerr.InvalidConfig) {
		t.Fatalf("bad value: %v", err)
	}
}
