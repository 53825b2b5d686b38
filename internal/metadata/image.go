// Package metadata holds the cluster metadata image: brokers, topics, their
// partitions (leader, epochs, replicas, ISR) and configs, plus producer-id
// allocation. The controller (internal/controller) builds it from the
// committed records of its replicated log, on a single node too; Local and
// its Store (a JSON file replaced atomically) are the single-node
// controller of earlier releases, kept for their upgrade and for unit
// tests.
package metadata

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-io/sluice/internal/acl"
)

// UUID is a Kafka topic id.
type UUID [16]byte

// NewUUID returns a random (v4) UUID.
func NewUUID() UUID {
	var u UUID
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// String renders the UUID as hex.
func (u UUID) String() string { return hex.EncodeToString(u[:]) }

// Partition is one partition's replication state as the controller sees it.
type Partition struct {
	Index int32 `json:"index"`
	// Leader is the leader's broker id, or -1 when the partition is offline.
	Leader int32 `json:"leader"`
	// LeaderEpoch is bumped on every leader change (docs/kafka-replication.md
	// §1.1).
	LeaderEpoch int32 `json:"leaderEpoch"`
	// PartitionEpoch is bumped on every change to the partition, ISR-only
	// changes included; AlterPartition compares and sets it
	// (docs/kafka-replication.md §2.4).
	PartitionEpoch int32   `json:"partitionEpoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	// Recovering is set after an unclean election (KIP-704): the ISR may
	// not grow beyond the leader until the leader reports it recovered.
	Recovering bool `json:"recovering,omitempty"`
	// AddingReplicas and RemovingReplicas describe a reassignment in
	// progress (KIP-455, Kafka's PartitionRecord addingReplicas /
	// removingReplicas): Replicas is then the target followed by the
	// replicas being removed, and the target is Replicas without
	// RemovingReplicas. Both are empty when no reassignment is in
	// progress; records and snapshots written before they existed decode
	// to nil.
	AddingReplicas   []int32 `json:"addingReplicas,omitempty"`
	RemovingReplicas []int32 `json:"removingReplicas,omitempty"`
	// ELR is the partition's eligible leader replicas (KIP-966, Kafka's
	// PartitionRecord eligibleLeaderReplicas): replicas that left the
	// ISR while it was below min.insync.replicas. The high watermark
	// does not advance while the ISR is that small, so each of them holds
	// every committed record and may be elected once the ISR is empty.
	// Empty whenever the ISR is at or above min.insync.replicas.
	ELR []int32 `json:"elr,omitempty"`
	// LastKnownELR is Kafka's lastKnownElr as KIP-966's balanced recovery
	// uses it: the leader the partition had when its ISR became empty,
	// the first candidate of an unclean election. Cleared once the
	// partition has a leader again.
	LastKnownELR []int32 `json:"lastKnownElr,omitempty"`
}

// HasReplica reports whether id is in the replica set.
func (p *Partition) HasReplica(id int32) bool {
	for _, r := range p.Replicas {
		if r == id {
			return true
		}
	}
	return false
}

// Topic is one topic.
type Topic struct {
	Name       string            `json:"name"`
	ID         UUID              `json:"id"`
	Partitions []Partition       `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Broker is one registered broker.
type Broker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
	// HTTP is the host:port of the broker's --http listener (status
	// pages, JSON API, /metrics), registered with the broker so that every
	// node's console can reach the others. Empty when the broker serves no
	// HTTP or registered before the field existed (records without it
	// decode to ""), so old metadata logs stay readable.
	HTTP string `json:"http,omitempty"`
	// Epoch is the broker epoch of the current incarnation: the metadata
	// offset of its registration (KRaft; KIP-903 fences older ones).
	Epoch int64 `json:"epoch"`
	// Incarnation identifies one process lifetime.
	Incarnation string `json:"incarnation,omitempty"`
	// Endpoints are the broker's advertised Kafka listeners by name
	// (listeners, advertised.listeners). Host and Port are those of its
	// inter-broker listener. Records written before endpoints existed
	// have none (Endpoint then answers with Host and Port).
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// DirectoryID is the directory.id of the broker's data directory
	// (meta.properties; Kafka registers its log directories' ids): a
	// wiped or replaced directory has a new one. Empty for a broker that
	// registered before the field existed.
	DirectoryID string `json:"directoryId,omitempty"`
	// Features are the feature levels the broker's binary supports
	// (features.go); none for a binary that predates features.
	Features map[string]FeatureRange `json:"features,omitempty"`
	// Fenced brokers lead nothing and are in no ISR.
	Fenced bool `json:"fenced,omitempty"`
	// ShuttingDown is set during a controlled shutdown (KIP-841: such a
	// broker may not join an ISR nor be elected).
	ShuttingDown bool `json:"shuttingDown,omitempty"`
}

// Endpoint is one advertised Kafka listener of a broker (the endpoints of
// Kafka's BrokerRegistrationRecord).
type Endpoint struct {
	// Name is the listener name (upper case), e.g. PLAINTEXT or SASL_SSL.
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	// Protocol is the listener's security protocol.
	Protocol string `json:"protocol,omitempty"`
}

// Endpoint returns the broker's endpoint on the named listener. A broker
// registered before endpoints existed (no Endpoints: one Kafka listener)
// answers every name with its Host and Port, and so does the empty name.
// ok is false if the broker has no such listener: Kafka leaves such a
// broker out of responses on that listener.
func (b Broker) Endpoint(listener string) (e Endpoint, ok bool) {
	if listener == "" || len(b.Endpoints) == 0 {
		return Endpoint{Host: b.Host, Port: b.Port}, true
	}
	for _, e := range b.Endpoints {
		if strings.EqualFold(e.Name, listener) {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Active reports whether the broker may lead and be in an ISR.
func (b Broker) Active() bool { return !b.Fenced && !b.ShuttingDown }

// Image is a point-in-time view of cluster metadata. Images handed out by a
// Store are immutable; mutate a Clone.
type Image struct {
	ClusterID string            `json:"clusterId"`
	Brokers   map[int32]Broker  `json:"brokers"`
	Topics    map[string]*Topic `json:"topics"`
	// NextProducerID is the first producer id not yet handed out.
	NextProducerID int64 `json:"nextProducerId"`
	// Offset counts applied changes (the metadata offset).
	Offset int64 `json:"offset"`
	// Scram holds the SCRAM credentials by user, then mechanism
	// (AlterUserScramCredentials; scram.go). Replaced, never changed in
	// place (ApplyScramOp), so clones share it.
	Scram map[string]map[string]ScramCredential `json:"scram,omitempty"`
	// Acls holds the ACL bindings (CreateAcls; acl.go), nil for none.
	// Immutable (AddAcls and RemoveAcls replace it), so clones share it.
	Acls *acl.Set `json:"acls,omitempty"`
	// Quotas holds the client quotas by entity, sorted by
	// user then client id (AlterClientQuotas; quota.go). Replaced, never
	// changed in place (ApplyQuotas), so clones share it.
	Quotas []ClientQuota `json:"quotas,omitempty"`
	// Features are the finalized feature levels (features.go), nil for
	// none (every level 0). Replaced, never changed in place.
	Features map[string]int16 `json:"features,omitempty"`
	// BrokerConfigs holds the dynamic broker configs (KIP-226;
	// resconfig.go) by resource name: "" the cluster default, else a
	// broker id. GroupConfigs holds the group configs (KIP-848) by group
	// id. Both replaced, never changed in place (SetResourceConfigs), so
	// clones share them; nil for none.
	BrokerConfigs map[string]map[string]string `json:"brokerConfigs,omitempty"`
	GroupConfigs  map[string]map[string]string `json:"groupConfigs,omitempty"`
}

// NewImage returns an empty image with a fresh cluster id.
func NewImage() *Image {
	id := NewUUID()
	return &Image{ClusterID: id.String()[:22], Brokers: map[int32]Broker{}, Topics: map[string]*Topic{}, NextProducerID: 1000}
}

// Clone returns a deep copy.
func (im *Image) Clone() *Image {
	c := *im
	c.Brokers = make(map[int32]Broker, len(im.Brokers))
	for k, v := range im.Brokers {
		c.Brokers[k] = v
	}
	c.Topics = make(map[string]*Topic, len(im.Topics))
	for k, t := range im.Topics {
		c.Topics[k] = t.Clone()
	}
	return &c
}

// Clone returns a deep copy of the topic.
func (t *Topic) Clone() *Topic {
	c := *t
	c.Partitions = make([]Partition, len(t.Partitions))
	for i, p := range t.Partitions {
		p.Replicas = append([]int32(nil), p.Replicas...)
		p.ISR = append([]int32(nil), p.ISR...)
		p.AddingReplicas = slices.Clone(p.AddingReplicas)
		p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
		p.ELR = slices.Clone(p.ELR)
		p.LastKnownELR = slices.Clone(p.LastKnownELR)
		c.Partitions[i] = p
	}
	if t.Configs != nil {
		c.Configs = make(map[string]string, len(t.Configs))
		for k, v := range t.Configs {
			c.Configs[k] = v
		}
	}
	return &c
}

// TopicNames returns the topic names, sorted.
func (im *Image) TopicNames() []string {
	names := make([]string, 0, len(im.Topics))
	for n := range im.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// TopicByID finds a topic by id.
func (im *Image) TopicByID(id UUID) *Topic {
	for _, t := range im.Topics {
		if t.ID == id {
			return t
		}
	}
	return nil
}

// BrokerIDs returns the broker ids, sorted.
func (im *Image) BrokerIDs() []int32 {
	ids := make([]int32, 0, len(im.Brokers))
	for id := range im.Brokers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Equal reports whether two registrations are the same, endpoints included.
func (b Broker) Equal(o Broker) bool {
	return b.ID == o.ID && b.Host == o.Host && b.Port == o.Port && b.Rack == o.Rack && b.HTTP == o.HTTP &&
		b.Epoch == o.Epoch && b.Incarnation == o.Incarnation && b.DirectoryID == o.DirectoryID && b.Fenced == o.Fenced &&
		b.ShuttingDown == o.ShuttingDown && slices.Equal(b.Endpoints, o.Endpoints) && maps.Equal(b.Features, o.Features)
}
