package metadata

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
)

// MaxPartitionsPerRequest bounds the partitions one CreateTopics request
// creates, over all its topics, and the partitions one CreatePartitions
// request adds: Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH
// (10,000; KAFKA-17870 for CreateTopics, KAFKA-19673 for
// CreatePartitions), which keeps one operation within the
// QuorumController's MAX_RECORDS_PER_USER_OP. It is checked before any
// placement, so a request for a million partitions is refused at once.
const MaxPartitionsPerRequest = 10000

// ErrTooManyPartitionsPerRequest is the refusal of a request over
// MaxPartitionsPerRequest: POLICY_VIOLATION with the message Kafka's
// controller gives ("Excessively large number of partitions per request."),
// plus the numbers.
func ErrTooManyPartitionsPerRequest(n int64) error {
	return fmt.Errorf("%w: Excessively large number of partitions per request (%d requested, at most %d).",
		kerr.PolicyViolation, n, MaxPartitionsPerRequest)
}

// Limits are KIP-578's partition limits. Kafka never shipped KIP-578's
// RESOURCE_LIMIT_REACHED error code, so a request over a limit is refused
// with POLICY_VIOLATION and a message naming the limit; nothing of it is
// created.
type Limits struct {
	// MaxBrokerPartitions is max.broker.partitions: the most partition
	// replicas one broker may hold.
	MaxBrokerPartitions int
	// MaxPartitions is max.partitions: the most partitions in the
	// cluster.
	MaxPartitions int
}

// LimitsOf reads the limits from the broker configuration.
func LimitsOf(cfg *config.Broker) Limits {
	return Limits{
		MaxBrokerPartitions: int(cfg.Int("max.broker.partitions", 50000)),
		MaxPartitions:       int(cfg.Int("max.partitions", 100000)),
	}
}

// NumPartitions counts the partitions of the image.
func NumPartitions(im *Image) int {
	n := 0
	for _, t := range im.Topics {
		n += len(t.Partitions)
	}
	return n
}

// ReplicaCounts counts the partition replicas each broker holds.
func ReplicaCounts(im *Image) map[int32]int {
	out := map[int32]int{}
	for _, t := range im.Topics {
		for i := range t.Partitions {
			for _, r := range t.Partitions[i].Replicas {
				out[r]++
			}
		}
	}
	return out
}

// CheckTotal refuses adding n partitions to a cluster of cur (max.partitions).
func (l Limits) CheckTotal(cur, n int) error {
	if cur+n > l.MaxPartitions {
		return fmt.Errorf("%w: adding %d partitions to the %d of the cluster would exceed max.partitions=%d",
			kerr.PolicyViolation, n, cur, l.MaxPartitions)
	}
	return nil
}

// CheckBrokers refuses new partitions that would put more than
// max.broker.partitions replicas on a broker, counts being the replicas
// each broker holds now.
func (l Limits) CheckBrokers(counts map[int32]int, parts []Partition) error {
	add := map[int32]int{}
	for i := range parts {
		for _, r := range parts[i].Replicas {
			add[r]++
		}
	}
	for id, n := range add {
		if counts[id]+n > l.MaxBrokerPartitions {
			return ErrBrokerFull(id, counts[id], n, l.MaxBrokerPartitions)
		}
	}
	return nil
}

// ErrBrokerFull is the refusal of n more replicas on broker id, which
// holds have (max.broker.partitions).
func ErrBrokerFull(id int32, have, n, limit int) error {
	return fmt.Errorf("%w: %d more partition replicas on broker %d, which holds %d, would exceed max.broker.partitions=%d",
		kerr.PolicyViolation, n, id, have, limit)
}
