package metadata

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
)

// Controller is the cluster-metadata authority a broker follows: the
// single-node Local store, or the Raft-backed quorum of internal/controller.
// Every mutating call returns only once the change is committed (and, for
// the Raft controller, applied to this node's image); errors are *kerr.Error
// values where Kafka has a code for them, possibly wrapped with a message.
type Controller interface {
	// Image returns the latest committed image. Images are immutable.
	Image() *Image
	// Watch registers fn to be called with every newly committed image, in
	// commit order, from one goroutine. fn must not block for long.
	Watch(fn func(*Image))
	// BrokerEpoch is this broker's registered epoch, -1 before registration.
	BrokerEpoch() int64

	// CreateTopic creates a topic. partitions/replicationFactor of -1 take
	// the broker defaults; assignment, if non-nil, gives each partition's
	// replicas (and then partitions and replicationFactor must be -1).
	CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int16, assignment [][]int32, configs map[string]string, validateOnly bool) error
	// DeleteTopic deletes a topic.
	DeleteTopic(ctx context.Context, name string) error
	// CreatePartitions grows a topic to count partitions. assignment, if
	// non-nil, gives each new partition's replicas, the first the
	// preferred leader (see AssignedPartitions); otherwise the controller
	// places them.
	CreatePartitions(ctx context.Context, name string, count int32, assignment [][]int32, validateOnly bool) error
	// AlterTopicConfigs applies incremental config changes to a topic.
	AlterTopicConfigs(ctx context.Context, name string, ops []ConfigOp, validateOnly bool) error
	// AllocateProducerID hands out a new producer id.
	AllocateProducerID(ctx context.Context) (int64, error)
	// AlterPartition proposes an ISR change (the partition leader only).
	AlterPartition(ctx context.Context, req AlterPartitionRequest) (AlterPartitionResponse, error)
	// ControlledShutdown moves leadership away from this broker and takes it
	// out of every ISR; it returns when the controller grants the shutdown.
	ControlledShutdown(ctx context.Context) error
	// Close stops the controller client (and, on a voter, the quorum member).
	Close() error
}

// ConfigOp is one change to a topic config (IncrementalAlterConfigs).
type ConfigOp struct {
	Name  string
	Op    int8 // 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
	Value string
}

// AlterPartitionRequest is a partition leader's ISR change proposal: a
// compare-and-set on (LeaderEpoch, PartitionEpoch) (docs/kafka-replication.md
// §2.4).
type AlterPartitionRequest struct {
	Topic          string
	Partition      int32
	BrokerID       int32 // the leader sending it
	BrokerEpoch    int64
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
	// ISRBrokerEpochs is parallel to NewISR: each member's broker epoch as
	// the leader saw it in its fetches (-1 unknown). KIP-903.
	ISRBrokerEpochs []int64
	// Recovered reports that a leader elected uncleanly has recovered
	// (KIP-704); it lets the ISR grow again.
	Recovered bool
}

// AlterPartitionResponse is the controller's answer, sent after commit.
type AlterPartitionResponse struct {
	Error          int16
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// Limits on administrative requests.
const (
	// MaxTopicNameLen is Kafka's limit (249: a partition directory name must
	// fit in 255 bytes).
	MaxTopicNameLen = 249
	// MaxPartitionsPerTopic bounds a topic's partitions (CreatePartitions
	// to more is INVALID_PARTITIONS). The partitions of the cluster and of
	// each broker are bounded by max.partitions and max.broker.partitions
	// (Limits).
	MaxPartitionsPerTopic = 10000
)

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// ValidateTopicName applies Kafka's topic name rules.
func ValidateTopicName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return kerr.InvalidTopicException
	case len(name) > MaxTopicNameLen:
		return kerr.InvalidTopicException
	case !legalTopic.MatchString(name):
		return kerr.InvalidTopicException
	}
	return nil
}

// ValidateConfigs checks topic configs by name, type and range, and the
// rules between them (config.CheckTopicConfigs).
func ValidateConfigs(configs map[string]string) error {
	for k, v := range configs {
		d, ok := config.LookupTopicDef(k)
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, k)
		}
		if err := d.Validate(v); err != nil {
			return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
		}
	}
	if err := config.CheckTopicConfigs(configs); err != nil {
		return fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
	}
	return nil
}

// ApplyConfigOps returns cur changed by ops, validated.
func ApplyConfigOps(cur map[string]string, ops []ConfigOp) (map[string]string, error) {
	next := map[string]string{}
	for k, v := range cur {
		next[k] = v
	}
	for _, op := range ops {
		d, ok := config.LookupTopicDef(op.Name)
		if !ok {
			return nil, fmt.Errorf("%w: unknown topic config %q", kerr.InvalidConfig, op.Name)
		}
		switch op.Op {
		case 0:
			next[op.Name] = op.Value
		case 1:
			delete(next, op.Name)
		case 2, 3:
			if d.Type != config.TypeList {
				return nil, fmt.Errorf("%w: %s is not a list", kerr.InvalidConfig, op.Name)
			}
			next[op.Name] = applyListOp(next[op.Name], op)
		default:
			return nil, kerr.InvalidRequest
		}
	}
	// The result is checked whole: a value set, a list element appended
	// or removed, and the rules between configs.
	if err := ValidateConfigs(next); err != nil {
		return nil, err
	}
	if err := config.CheckTopicConfigChange(cur, next); err != nil {
		return nil, fmt.Errorf("%w: %v", kerr.InvalidConfig, err)
	}
	return next, nil
}

func applyListOp(cur string, op ConfigOp) string {
	items := splitList(cur)
	add := splitList(op.Value)
	if op.Op == 2 {
		for _, a := range add {
			if !slices.Contains(items, a) {
				items = append(items, a)
			}
		}
	} else {
		items = slices.DeleteFunc(items, func(it string) bool { return slices.Contains(add, it) })
	}
	return strings.Join(items, ",")
}

// splitList splits a comma-separated list config, dropping empty items.
func splitList(s string) []string {
	return slices.DeleteFunc(strings.Split(s, ","), func(x string) bool { return x == "" })
}

// Syncer is a Controller whose node may apply committed metadata later
// than the active controller commits it (the Raft controller). Local
// applies at commit and needs none.
type Syncer interface {
	// SyncMetadata returns once this node's image holds every change the
	// active controller had committed when it was asked: a read barrier
	// before acting on metadata another node may have just changed.
	SyncMetadata(ctx context.Context) error
}
