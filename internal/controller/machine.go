package controller

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// Machine is the active controller without raft, network, goroutines or
// wall-clock time: the same handlers the controller port serves
// (handlers.go: BrokerRegistration, BrokerHeartbeat with controlled
// shutdown, AlterPartitions, CreateTopic), the same session fencing and
// elections (active.go) and the same decision batching (decide.go), each
// decision committed at once as the next entries of an in-memory metadata
// log and applied by the same FSM (fsm.go) into the image brokers follow.
// Requests and replies go through their JSON encoding, as over the
// controller port. A Machine is not safe for concurrent use; the
// deterministic simulator (internal/sim) runs it on its one goroutine as
// the cluster's controller, with its clock and its seed.
type Machine struct {
	n   *Node
	fsm fsm
	// entries are the committed entries' data; entry i has offset i+1.
	entries [][]byte
}

// MachineOptions configures a Machine.
type MachineOptions struct {
	// Broker gives settings by Kafka name: broker.session.timeout.ms,
	// unclean.leader.election.enable, num.partitions, the partition
	// limits. Default config.Defaults().
	Broker *config.Broker
	// Now is the clock of session expiry. Default time.Now.
	Now func() time.Time
	// Seed draws the cluster and topic ids (metadata.UUID).
	Seed uint64
	// Logger defaults to one that discards.
	Logger *slog.Logger
	// Knobs re-introduce fixed bugs (tests only).
	Knobs Knobs
	// Import is an earlier release's single-node metadata the new
	// cluster starts from (Config.Import).
	Import *metadata.Image
}

// NewMachine returns the active controller of a new cluster: its first
// entry holds the cluster id (or the imported metadata) and feature
// levels.
func NewMachine(o MachineOptions) *Machine {
	if o.Broker == nil {
		o.Broker = config.Defaults()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	lim := metadata.LimitsOf(o.Broker)
	st := &imageState{im: emptyImage(), changed: make(chan struct{})}
	n := &Node{
		cfg: Config{Broker: o.Broker, MaxBrokerPartitions: lim.MaxBrokerPartitions, MaxPartitions: lim.MaxPartitions, Import: o.Import},
		log: o.Logger.With("component", "controller"), st: st, closing: make(chan struct{}),
	}
	n.baseCtx = context.Background()
	m := &Machine{n: n, fsm: fsm{st: st}}
	a := &n.act
	a.init(n)
	if o.Now != nil {
		a.now = o.Now
	}
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	a.newUUID = func() metadata.UUID {
		var u metadata.UUID
		binary.BigEndian.PutUint64(u[:8], rng.Uint64())
		binary.BigEndian.PutUint64(u[8:], rng.Uint64())
		return u
	}
	a.knobs = o.Knobs
	a.propose = m.commit
	a.mu.Lock()
	a.activateLocked()
	a.mu.Unlock()
	a.bootstrap(n.baseCtx)
	return m
}

// commit appends the entries to the log and applies them, in order.
func (m *Machine) commit(entries [][]record) ([]int64, int, error) {
	offs := make([]int64, len(entries))
	for i, recs := range entries {
		data, err := json.Marshal(recs)
		if err != nil {
			return offs, i, fmt.Errorf("%w: encoding metadata records: %v", kerr.UnknownServerError, err)
		}
		m.entries = append(m.entries, data)
		idx := uint64(len(m.entries))
		m.fsm.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: data})
		offs[i] = int64(idx)
	}
	return offs, len(entries), nil
}

// Image is the image of every committed entry.
func (m *Machine) Image() *metadata.Image { return m.n.st.Image() }

// call serves one controller RPC as the controller port does: the request
// and the reply are encoded and decoded as JSON. It returns the offset of
// the last entry the request wrote (0 if none).
func (m *Machine) call(op string, in, out any) (int64, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	reply, off, err := handlers[op](&m.n.act, m.n.baseCtx, body)
	if err != nil {
		return off, err
	}
	if out != nil {
		data, err := json.Marshal(reply)
		if err != nil {
			return off, err
		}
		if err := json.Unmarshal(data, out); err != nil {
			return off, err
		}
	}
	return off, nil
}

// Register is BrokerRegistration: a new incarnation of b (b.Incarnation
// tells a retry from a restart) replaces the old one, fenced until a
// heartbeat shows it caught up. previousEpoch is the broker epoch its
// data directory recorded (-1 for none: a new or wiped directory; an
// unclean registration, elr.go). It returns the new broker epoch.
func (m *Machine) Register(b metadata.Broker, previousEpoch int64) (int64, error) {
	var resp registerResp
	_, err := m.call(opRegister, registerReq{Broker: b, PreviousEpoch: previousEpoch}, &resp)
	return resp.Epoch, err
}

// HeartbeatReply is a BrokerHeartbeat's answer.
type HeartbeatReply struct {
	// Fenced and ShuttingDown are the broker's registration state after
	// the heartbeat.
	Fenced, ShuttingDown bool
	// ShouldShutDown grants the controlled shutdown asked for; the broker
	// stops once it has applied the image at CatchUp.
	ShouldShutDown bool
	CatchUp        int64
}

// Heartbeat is BrokerHeartbeat from broker id at its broker epoch, which
// has applied the metadata up to offset applied (docs/kafka-replication.md §4.3 for
// wantShutDown).
func (m *Machine) Heartbeat(id int32, epoch, applied int64, wantShutDown bool) (HeartbeatReply, error) {
	var resp heartbeatResp
	off, err := m.call(opHeartbeat, heartbeatReq{ID: id, Epoch: epoch, Offset: applied, WantShutDown: wantShutDown}, &resp)
	return HeartbeatReply{Fenced: resp.Fenced, ShuttingDown: resp.ShuttingDown, ShouldShutDown: resp.ShouldShutDown, CatchUp: off}, err
}

// AlterPartition commits an ISR change by compare-and-set, as a broker's
// batch of one (AlterPartitions).
func (m *Machine) AlterPartition(req metadata.AlterPartitionRequest) (metadata.AlterPartitionResponse, error) {
	var resp alterPartitionsResp
	if _, err := m.call(opAlterPartitions, alterPartitionsReq{Reqs: []metadata.AlterPartitionRequest{req}}, &resp); err != nil {
		return metadata.AlterPartitionResponse{}, err
	}
	if len(resp.Resps) != 1 {
		return metadata.AlterPartitionResponse{}, kerr.UnknownServerError
	}
	return resp.Resps[0], nil
}

// CreateTopic creates a topic with the controller's placement over the
// active brokers.
func (m *Machine) CreateTopic(name string, partitions int32, rf int16, configs map[string]string) error {
	_, err := m.call(opCreateTopic, createTopicReq{Name: name, Partitions: partitions, RF: rf, Configs: configs}, nil)
	return err
}

// Tick runs the active controller's periodic work once: fencing every
// broker whose session expired, and electing leaderless partitions.
func (m *Machine) Tick() {
	a := &m.n.act
	a.fenceStale()
	if !leaderless(m.Image()) {
		return
	}
	a.decideSplit(m.n.baseCtx, func(im *metadata.Image, b *batch) error {
		a.electOffline(b, "")
		return nil
	})
}

func leaderless(im *metadata.Image) bool {
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			if p.Leader == noLeader {
				return true
			}
		}
	}
	return false
}

// Failover starts a new term of leadership on the committed log, as a
// newly elected controller does: sessions restart from now, and what the
// previous term heard from heartbeats (applied offsets, controlled
// shutdowns' offsets) is forgotten.
func (m *Machine) Failover() {
	a := &m.n.act
	a.mu.Lock()
	a.gen++
	a.activateLocked()
	a.mu.Unlock()
}

// AlterTopicConfigs is IncrementalAlterConfigs on a topic.
func (m *Machine) AlterTopicConfigs(topic string, ops []metadata.ConfigOp) error {
	_, err := m.call(opAlterConfigs, topicReq{Name: topic, Ops: ops}, nil)
	return err
}

// UpdateFeatures is UpdateFeatures; it returns the error of each refused
// update by name.
func (m *Machine) UpdateFeatures(updates []metadata.FeatureUpdate) (map[string]error, error) {
	var resp updateFeaturesResp
	if _, err := m.call(opUpdateFeatures, updateFeaturesReq{Updates: updates}, &resp); err != nil {
		return nil, err
	}
	out := map[string]error{}
	for name, e := range resp.Errors {
		out[name] = codeErr(e.Code, e.Msg)
	}
	return out, nil
}
