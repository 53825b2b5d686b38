package controller

import (
	"encoding/json"
	"io"
	"maps"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
)

// recType names a metadata record (KRaft's record types, docs/kafka-replication.md §6).
type recType string

// Record types. One raft entry is a JSON array of records applied
// atomically, in order.
const (
	recClusterID         recType = "ClusterID"
	recRegisterBroker    recType = "RegisterBroker"
	recUnfence           recType = "Unfence"
	recFence             recType = "Fence"
	recShutdown          recType = "ControlledShutdown"
	recUnregister        recType = "Unregister"
	recCreateTopic       recType = "CreateTopic"
	recDeleteTopic       recType = "DeleteTopic"
	recCreatePartitions  recType = "CreatePartitions"
	recConfigChange      recType = "ConfigChange"
	recPartitionChange   recType = "PartitionChange"
	recProducerIDs       recType = "ProducerIDs"
	recScram             recType = "UserScramCredential"
	recAclAdd            recType = "AccessControlEntry"
	recAclRemove         recType = "RemoveAccessControlEntry"
	recClientQuota       recType = "ClientQuota"
	recFeatureLevel      recType = "FeatureLevel"
	recBrokerFeatures    recType = "BrokerFeatures"
	recResourceConfig    recType = "ResourceConfig"
	recImport            recType = "ImportImage"
	maxEntryRecords              = 1 << 20
	producerIDBlock      int64   = 1000
	initialNextProducer  int64   = 1000
	noLeader             int32   = -1
	placeholderRegOffset int64   = -2
)

// featureLevel is recFeatureLevel's content (Kafka's FeatureLevelRecord).
type featureLevel struct {
	Name  string `json:"name"`
	Level int16  `json:"level"`
}

// record is one metadata change. Only the fields of its type are set.
// Everything an apply needs is in the record (ids, placement, the new
// partition state), so replaying the log is a pure function of it; the
// only value taken from the entry is its raft index (the broker epoch).
type record struct {
	Type recType `json:"t"`
	// ClusterID: recClusterID.
	ClusterID string `json:"clusterId,omitempty"`
	// Feature: recFeatureLevel finalizes a feature level.
	Feature *featureLevel `json:"feature,omitempty"`
	// Features: recBrokerFeatures replaces the supported features of
	// broker ID at Epoch (a broker whose binary changed under a
	// registration another binary wrote).
	Features map[string]metadata.FeatureRange `json:"features,omitempty"`
	// Broker: recRegisterBroker (Epoch, Fenced, ShuttingDown are set on apply).
	Broker *metadata.Broker `json:"broker,omitempty"`
	// ID, Epoch: the broker of Fence / Unfence / ControlledShutdown /
	// Unregister; the record is a no-op if Epoch is no longer current.
	ID    int32 `json:"id,omitempty"`
	Epoch int64 `json:"epoch,omitempty"`
	// Topic: recCreateTopic.
	Topic *metadata.Topic `json:"topic,omitempty"`
	// Name: the topic of DeleteTopic, CreatePartitions, ConfigChange,
	// PartitionChange.
	Name string `json:"name,omitempty"`
	// Partitions: recCreatePartitions appends them.
	Partitions []metadata.Partition `json:"partitions,omitempty"`
	// Configs: recConfigChange replaces the topic's configs.
	Configs map[string]string `json:"configs,omitempty"`
	// Part: recPartitionChange.
	Part *partChange `json:"part,omitempty"`
	// NextProducerID: recProducerIDs advances the counter to it.
	NextProducerID int64 `json:"nextProducerId,omitempty"`
	// Scram: recScram upserts or deletes one user's credential for one
	// mechanism (Kafka's UserScramCredentialRecord and
	// RemoveUserScramCredentialRecord).
	Scram *metadata.ScramOp `json:"scram,omitempty"`
	// Acls: recAclAdd stores these ACL bindings, recAclRemove removes
	// them (Kafka's AccessControlEntryRecord and
	// RemoveAccessControlEntryRecord, one record per request here).
	Acls []acl.Binding `json:"acls,omitempty"`
	// Quotas: recClientQuota sets and removes client quota keys (Kafka's
	// ClientQuotaRecord, one record per request here).
	Quotas []metadata.QuotaAlteration `json:"quotas,omitempty"`
	// Resource: recResourceConfig replaces the dynamic configs of a
	// BROKER or GROUP resource with Configs (Kafka's ConfigRecords of
	// that resource, one record per change here).
	Resource *metadata.ConfigResource `json:"resource,omitempty"`
	// Import: recImport starts a new cluster (no cluster id yet) from
	// an earlier binary's single-node metadata (importRecord).
	Import *metadata.Image `json:"import,omitempty"`
}

// partChange is the new leader/ISR of one partition. Applying it bumps the
// partition epoch, and the leader epoch iff the leader changes.
type partChange struct {
	Index      int32   `json:"index"`
	Leader     int32   `json:"leader"`
	ISR        []int32 `json:"isr"`
	Recovering bool    `json:"recovering,omitempty"`
	// Assign, when set, replaces the replica set and the reassignment
	// state (KIP-455; the replicas, addingReplicas and removingReplicas
	// of Kafka's PartitionChangeRecord). Records without it (all records
	// written before reassignment existed) leave them as they are.
	Assign *assignment `json:"assign,omitempty"`
	// ELR and LastKnownELR replace the partition's eligible leader
	// replicas and last known leader (KIP-966); records written before
	// ELR existed have neither and clear them (there were none).
	ELR          []int32 `json:"elr,omitempty"`
	LastKnownELR []int32 `json:"lastKnownElr,omitempty"`
}

// assignment is a partition's replica set and reassignment state.
type assignment struct {
	Replicas []int32 `json:"replicas"`
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

// emptyImage is the image before the first entry: deterministic on every
// node (the cluster id is written by the first active controller).
func emptyImage() *metadata.Image {
	return &metadata.Image{Brokers: map[int32]metadata.Broker{}, Topics: map[string]*metadata.Topic{}, NextProducerID: initialNextProducer}
}

// txn is a copy-on-write view of an image being changed: brokers are
// copied, topics are cloned on first write.
type txn struct {
	im      *metadata.Image
	touched map[string]bool
}

func newTxn(base *metadata.Image) *txn {
	c := *base
	c.Brokers = make(map[int32]metadata.Broker, len(base.Brokers))
	for k, v := range base.Brokers {
		c.Brokers[k] = v
	}
	c.Topics = make(map[string]*metadata.Topic, len(base.Topics))
	for k, v := range base.Topics {
		c.Topics[k] = v
	}
	return &txn{im: &c, touched: map[string]bool{}}
}

// topic returns a writable topic, or nil.
func (tx *txn) topic(name string) *metadata.Topic {
	t, ok := tx.im.Topics[name]
	if !ok {
		return nil
	}
	if !tx.touched[name] {
		t = t.Clone()
		tx.im.Topics[name] = t
		tx.touched[name] = true
	}
	return t
}

// apply applies one record at raft index idx. Invalid records (an unknown
// topic, a stale broker epoch) are ignored: apply never fails, so every
// node reaches the same image.
func (tx *txn) apply(r *record, idx int64) {
	im := tx.im
	switch r.Type {
	case recClusterID:
		if im.ClusterID == "" {
			im.ClusterID = r.ClusterID
		}
	case recImport:
		if im.ClusterID != "" || r.Import == nil || r.Import.ClusterID == "" {
			return
		}
		old := r.Import
		im.ClusterID, im.NextProducerID = old.ClusterID, old.NextProducerID
		im.Scram, im.Acls, im.Quotas = old.Scram, old.Acls, old.Quotas
		im.BrokerConfigs, im.GroupConfigs = old.BrokerConfigs, old.GroupConfigs
		for name, t := range old.Topics {
			tx.im.Topics[name] = t.Clone()
			tx.touched[name] = true
		}
	case recFeatureLevel:
		if r.Feature == nil || r.Feature.Name == "" {
			return
		}
		fs := maps.Clone(im.Features)
		if fs == nil {
			fs = map[string]int16{}
		}
		if r.Feature.Level == 0 {
			delete(fs, r.Feature.Name)
		} else {
			fs[r.Feature.Name] = r.Feature.Level
		}
		im.Features = fs
	case recBrokerFeatures:
		if b, ok := im.Brokers[r.ID]; ok && b.Epoch == r.Epoch {
			b.Features = r.Features
			im.Brokers[r.ID] = b
		}
	case recRegisterBroker:
		if r.Broker == nil {
			return
		}
		b := *r.Broker
		b.Epoch, b.Fenced, b.ShuttingDown = idx, true, false
		im.Brokers[b.ID] = b
	case recUnfence, recFence, recShutdown, recUnregister:
		b, ok := im.Brokers[r.ID]
		if !ok || b.Epoch != r.Epoch {
			return
		}
		switch r.Type {
		case recUnfence:
			b.Fenced = false
		case recFence:
			b.Fenced = true
		case recShutdown:
			b.ShuttingDown = true
		case recUnregister:
			delete(im.Brokers, r.ID)
			return
		}
		im.Brokers[r.ID] = b
	case recCreateTopic:
		if r.Topic == nil || im.Topics[r.Topic.Name] != nil {
			return
		}
		t := r.Topic.Clone()
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		im.Topics[t.Name] = t
		tx.touched[t.Name] = true
	case recDeleteTopic:
		delete(im.Topics, r.Name)
		delete(tx.touched, r.Name)
	case recCreatePartitions:
		if t := tx.topic(r.Name); t != nil {
			for _, p := range r.Partitions {
				if int(p.Index) != len(t.Partitions) {
					return
				}
				p.Replicas = append([]int32(nil), p.Replicas...)
				p.ISR = append([]int32(nil), p.ISR...)
				t.Partitions = append(t.Partitions, p)
			}
		}
	case recConfigChange:
		if t := tx.topic(r.Name); t != nil {
			t.Configs = map[string]string{}
			for k, v := range r.Configs {
				t.Configs[k] = v
			}
		}
	case recPartitionChange:
		t := tx.topic(r.Name)
		if t == nil || r.Part == nil || r.Part.Index < 0 || int(r.Part.Index) >= len(t.Partitions) {
			return
		}
		p := &t.Partitions[r.Part.Index]
		if p.Leader != r.Part.Leader {
			p.LeaderEpoch++
		}
		p.PartitionEpoch++
		p.Leader = r.Part.Leader
		p.ISR = append([]int32(nil), r.Part.ISR...)
		p.Recovering = r.Part.Recovering
		p.ELR = nilIfEmpty(r.Part.ELR)
		p.LastKnownELR = nilIfEmpty(r.Part.LastKnownELR)
		if a := r.Part.Assign; a != nil && len(a.Replicas) > 0 {
			p.Replicas = append([]int32(nil), a.Replicas...)
			p.AddingReplicas = append([]int32(nil), a.Adding...)
			p.RemovingReplicas = append([]int32(nil), a.Removing...)
			if len(p.AddingReplicas) == 0 {
				p.AddingReplicas = nil
			}
			if len(p.RemovingReplicas) == 0 {
				p.RemovingReplicas = nil
			}
		}
	case recProducerIDs:
		if r.NextProducerID > im.NextProducerID {
			im.NextProducerID = r.NextProducerID
		}
	case recScram:
		// Checked by the active controller; a record that no longer
		// applies (a deletion of a credential gone) changes nothing.
		if r.Scram != nil && metadata.CheckScramOp(im, *r.Scram) == nil {
			metadata.ApplyScramOp(im, *r.Scram)
		}
	case recAclAdd:
		// Checked by the active controller; adding a binding present
		// or removing one absent changes nothing.
		metadata.AddAcls(im, r.Acls)
	case recAclRemove:
		metadata.RemoveAcls(im, r.Acls)
	case recClientQuota:
		// Checked by the active controller.
		metadata.ApplyQuotas(im, r.Quotas)
	case recResourceConfig:
		// Checked by the active controller.
		if r.Resource != nil {
			im.SetResourceConfigs(*r.Resource, r.Configs)
		}
	}
}

func nilIfEmpty(s []int32) []int32 {
	if len(s) == 0 {
		return nil
	}
	return append([]int32(nil), s...)
}

// fsm is the raft state machine: the image built from committed entries.
type fsm struct {
	st *imageState
}

// Apply implements raft.FSM.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var recs []record
	if err := json.Unmarshal(l.Data, &recs); err != nil || len(recs) > maxEntryRecords {
		// A malformed entry cannot have been written by this code; skip it
		// deterministically but still advance the offset.
		recs = nil
	}
	f.st.applyMu.Lock()
	defer f.st.applyMu.Unlock()
	cur := f.st.Image()
	if int64(l.Index) <= cur.Offset {
		// Already in an image this node fetched while it was outside
		// the raft configuration (a voter being added; voters.go).
		return nil
	}
	tx := newTxn(cur)
	for i := range recs {
		tx.apply(&recs[i], int64(l.Index))
	}
	tx.im.Offset = int64(l.Index)
	f.st.publish(tx.im)
	return nil
}

// Snapshot implements raft.FSM: the image is immutable, so capturing the
// pointer is enough; Persist encodes it off the FSM goroutine.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{im: f.st.Image()}, nil
}

// Restore implements raft.FSM.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	im := emptyImage()
	if err := json.NewDecoder(rc).Decode(im); err != nil {
		return err
	}
	if im.Brokers == nil {
		im.Brokers = map[int32]metadata.Broker{}
	}
	if im.Topics == nil {
		im.Topics = map[string]*metadata.Topic{}
	}
	f.st.applyMu.Lock()
	defer f.st.applyMu.Unlock()
	if cur := f.st.Image(); cur.Offset > im.Offset {
		return nil // a fetched image is newer; later entries apply on it
	}
	f.st.publish(im)
	return nil
}

type fsmSnapshot struct{ im *metadata.Image }

// Persist implements raft.FSMSnapshot: the image as JSON (topics, configs,
// broker registrations, producer-id counter, offset).
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(s.im); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *fsmSnapshot) Release() {}

// imageState holds the node's current image, wakes waiters on change and
// feeds watchers, in order, from one goroutine.
type imageState struct {
	// applyMu orders the writers: the raft FSM and, on a node outside
	// the raft configuration, the fetched images (publishNewer).
	applyMu  sync.Mutex
	mu       sync.Mutex
	im       *metadata.Image
	changed  chan struct{} // closed and replaced on every publish
	watchers []func(*metadata.Image)
	queue    []*metadata.Image
	wake     chan struct{}
	done     chan struct{}
	stopped  chan struct{}
}

// maxWatchQueue bounds images queued for slow watchers; beyond it the
// newest image replaces the queue's tail (order is kept, the last image is
// always delivered).
const maxWatchQueue = 4096

func newImageState() *imageState {
	s := &imageState{im: emptyImage(), changed: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go s.deliver()
	return s
}

func (s *imageState) Image() *metadata.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.im
}

// publish installs im (which must only move forward).
func (s *imageState) publish(im *metadata.Image) {
	s.mu.Lock()
	s.im = im
	close(s.changed)
	s.changed = make(chan struct{})
	if len(s.watchers) > 0 {
		if len(s.queue) >= maxWatchQueue {
			s.queue[len(s.queue)-1] = im
		} else {
			s.queue = append(s.queue, im)
		}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// publishNewer publishes a fetched image if it is newer than the
// current one.
func (s *imageState) publishNewer(im *metadata.Image) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if im.Offset > s.Image().Offset {
		s.publish(im)
	}
}

// current returns the image and a channel closed at the next publish.
func (s *imageState) current() (*metadata.Image, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.im, s.changed
}

func (s *imageState) watch(fn func(*metadata.Image)) {
	s.mu.Lock()
	s.watchers = append(s.watchers, fn)
	s.mu.Unlock()
}

func (s *imageState) deliver() {
	defer close(s.stopped)
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if len(s.queue) == 0 {
				s.mu.Unlock()
				break
			}
			im := s.queue[0]
			s.queue = s.queue[1:]
			ws := append([]func(*metadata.Image){}, s.watchers...)
			s.mu.Unlock()
			for _, w := range ws {
				w(im)
			}
			select {
			case <-s.done:
				return
			default:
			}
		}
	}
}

func (s *imageState) close() {
	close(s.done)
	<-s.stopped
}
