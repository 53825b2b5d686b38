package sharetest

import (
	"testing"

	"github.com/sluice-io/sluice/internal/share"
)

func TestMemPersisterConformance(t *testing.T) {
	PersisterConformance(t, share.NewMemPersister(), "mem", [16]byte{0xab, 1})
}
