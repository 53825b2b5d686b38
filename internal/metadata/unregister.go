package metadata

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// BrokerUnregisterer is a Controller that serves UnregisterBroker (API 64,
// KIP-631's broker lifecycle). Local and the Raft controller are.
type BrokerUnregisterer interface {
	// UnregisterBroker removes broker id's registration (CheckUnregister
	// says when it may). Afterwards the id is free: a new broker with it
	// registers afresh.
	UnregisterBroker(ctx context.Context, id int32) error
}

// CheckUnregister decides whether broker id may be unregistered from im.
// Kafka's ReplicationControlManager.unregisterBroker refuses an unknown id
// with BROKER_ID_NOT_REGISTERED and otherwise takes the broker out of
// every ISR and leadership, even a live broker's (it then registers
// again) and even one still listed as a replica. sluice takes the safe
// rule: INVALID_REQUEST for a broker that is active (unfenced and not
// shutting down: stop it first) or that any partition still lists as a
// replica (move the replicas away first: a reassignment), so
// unregistering never takes a copy of data out of a replica set.
func CheckUnregister(im *Image, id int32) error {
	b, ok := im.Brokers[id]
	if !ok {
		return fmt.Errorf("%w: broker %d is not registered", kerr.BrokerIDNotRegistered, id)
	}
	if b.Active() {
		return fmt.Errorf("%w: broker %d is active (unfenced, not shutting down): stop it before unregistering it", kerr.InvalidRequest, id)
	}
	var hosted []string
	for _, t := range im.Topics {
		for i := range t.Partitions {
			if t.Partitions[i].HasReplica(id) {
				hosted = append(hosted, fmt.Sprintf("%s-%d", t.Name, t.Partitions[i].Index))
			}
		}
	}
	if len(hosted) > 0 {
		sort.Strings(hosted)
		n := len(hosted)
		if n > 5 {
			hosted = append(hosted[:5], "...")
		}
		return fmt.Errorf("%w: broker %d still hosts %d partition replicas (%s): move them to other brokers first (a reassignment, e.g. sluice cluster decommission --broker %d)",
			kerr.InvalidRequest, id, n, strings.Join(hosted, ", "), id)
	}
	return nil
}

// UnregisterBroker implements BrokerUnregisterer. The only registered
// broker is this node, which is active while it serves the request: any
// id is refused (BROKER_ID_NOT_REGISTERED, or INVALID_REQUEST for itself).
func (l *Local) UnregisterBroker(_ context.Context, id int32) error {
	if err := CheckUnregister(l.store.Image(), id); err != nil {
		return err
	}
	return fmt.Errorf("%w: a single-node cluster cannot unregister its broker", kerr.InvalidRequest)
}
