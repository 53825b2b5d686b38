package replica

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrorCodesMatchKerr(t *testing.T) {
	for _, c := range []struct {
		got  int16
		want *kerr.Error
	}{
		{ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
		{ErrNotLeaderOrFollower, kerr.NotLeaderForPartition},
		{ErrRequestTimedOut, kerr.RequestTimedOut},
		{ErrNotEnoughReplicas, kerr.NotEnoughReplicas},
		{ErrNotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend},
		{ErrNotController, kerr.NotController},
		{ErrInvalidRequest, kerr.InvalidRequest},
		{ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
		{ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{ErrOperationNotAttempted, kerr.OperationNotAttempted},
		{ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch},
		{ErrUnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
		{ErrInvalidUpdateVersion, kerr.InvalidUpdateVersion},
		{ErrIneligibleReplica, kerr.IneligibleReplica},
		{ErrNewLeaderElected, kerr.NewLeaderElected},
		{ErrOffsetMovedToTieredStorage, kerr.OffsetMovedToTieredStorage},
	} {
		if c.got != c.want.Code {
			t.Errorf("%s: have %d, kerr says %d", c.want.Message, c.got, c.want.Code)
		}
	}
}
