package status

import (
	"sort"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/share"
)

// NodeView is one node's own view, served at /api/v1/node: what the
// console of every node fetches from every other node and merges into the
// cluster view. Nothing in it is fetched from elsewhere.
type NodeView struct {
	NodeID  int32  `json:"nodeId"`
	Version string `json:"version"`
	// NowMs is when the view was taken (Unix ms, this node's clock);
	// StartedMs when the status server started.
	NowMs     int64 `json:"nowMs"`
	StartedMs int64 `json:"startedMs"`
	// MetadataOffset is the offset of the newest metadata image applied
	// here; comparing it across nodes shows a node behind the log.
	MetadataOffset int64 `json:"metadataOffset"`
	// Controller is the active controller's node id as this node last
	// learned it (-1 if unknown); Voter says whether this node is a
	// controller quorum voter.
	Controller int32 `json:"controller"`
	Voter      bool  `json:"voter"`
	// Partitions are the local replicas (Snapshot): for partitions led
	// here, the followers' LEOs as this leader sees them.
	Partitions []Partition `json:"partitions"`
	// Groups are the consumer groups this node coordinates.
	Groups []group.Summary `json:"groups"`
	// SharePartitions are the share partitions loaded here (on the
	// leaders of their partitions): where each share group is in them.
	SharePartitions []SharePartition `json:"sharePartitions"`
	// Transactions are the open transactions this node coordinates.
	Transactions []Transaction `json:"transactions"`
	// Topics are the per-topic produce/fetch counters and rates of this
	// node, by topic name.
	Topics map[string]TopicRates `json:"topics"`
	// Strays are the stray partition directories in this node's data
	// directory: renamed aside, never deleted (docs/operations.md).
	Strays []broker.Stray `json:"strays"`
}

// TopicRates are a topic's cumulative counters on one node and their rates
// over the sampler's window (per second; 0 until two samples exist).
type TopicRates struct {
	broker.TopicCounters
	BytesInPerSec    float64 `json:"bytesInPerSec"`
	RecordsInPerSec  float64 `json:"recordsInPerSec"`
	BytesOutPerSec   float64 `json:"bytesOutPerSec"`
	RecordsOutPerSec float64 `json:"recordsOutPerSec"`
}

// leaderInfo is what a metadata.Controller may tell about the quorum
// (controller.Node does, a single node's quorum of one included;
// metadata.Local, which in-process unit tests run on, does not).
type leaderInfo interface {
	Leader() (int32, string)
	IsVoter() bool
}

// nodeView takes this node's view.
func (s *Server) nodeView() NodeView {
	b := s.b
	v := NodeView{NodeID: b.NodeID(), Version: s.version, NowMs: b.Now().UnixMilli(), StartedMs: s.started.UnixMilli(),
		MetadataOffset: b.Image().Offset, Controller: b.NodeID(), Voter: true,
		Partitions: Snapshot(b), Groups: []group.Summary{}, SharePartitions: []SharePartition{}, Transactions: []Transaction{}, Topics: s.rates.rates()}
	if li, ok := b.Controller().(leaderInfo); ok {
		v.Controller, _ = li.Leader()
		v.Voter = li.IsVoter()
	}
	if v.Partitions == nil {
		v.Partitions = []Partition{}
	}
	if v.Strays, _ = b.Strays(); v.Strays == nil {
		v.Strays = []broker.Stray{}
	}
	if s.groups != nil {
		if gs := s.groups(); gs != nil {
			v.Groups = gs
		}
	}
	if s.shares != nil {
		v.SharePartitions = sharePartitions(b, v.Partitions, s.shares(b.Now()))
	}
	if s.txns != nil {
		if ts := s.txns(); ts != nil {
			v.Transactions = ts
		}
	}
	return v
}

// SharePartition is where a share group is in one partition, as the
// partition's leader holds it: the share-partition start offset (SPSO),
// the end of the in-flight window (SPEO), the records locked for members
// and those acknowledged or archived above SPSO.
type SharePartition struct {
	Group       string `json:"group"`
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"startOffset"`
	EndOffset   int64  `json:"endOffset"`
	InFlight    int    `json:"inFlight"`
	Completed   int    `json:"completed"`
	// HighWatermark is the partition's (-1 if unknown); Lag is the
	// records from SPSO to it not yet acknowledged or archived, as
	// DescribeShareGroupOffsets v1 counts it (-1 if unknown).
	HighWatermark int64 `json:"highWatermark"`
	Lag           int64 `json:"lag"`
}

// sharePartitions names the share partitions' topics and adds their
// partitions' high watermarks (from this node's replicas, parts), leaving
// out those of partitions this node no longer leads.
func sharePartitions(b *broker.Broker, parts []Partition, sts []share.PartitionStatus) []SharePartition {
	hw := map[string]int64{}
	for _, p := range parts {
		if p.Role == "leader" {
			hw[tpKey(p.Topic, p.Partition)] = p.HighWatermark
		}
	}
	out := []SharePartition{}
	for _, st := range sts {
		name, ok := b.TopicName(metadata.UUID(st.Key.TopicID))
		if !ok {
			continue
		}
		h, led := hw[tpKey(name, st.Key.Partition)]
		if !led {
			continue // loaded while this node led the partition
		}
		sp := SharePartition{Group: st.Key.Group, Topic: name, Partition: st.Key.Partition, StartOffset: st.Start, EndOffset: st.End,
			InFlight: st.Acquired, Completed: st.Completed, HighWatermark: -1, Lag: -1}
		if h >= 0 {
			sp.HighWatermark, sp.Lag = h, max(h-st.Start-int64(st.Completed), 0)
		}
		out = append(out, sp)
	}
	return out
}

// rateWindow is how far back the rates look: long enough to smooth
// batching, short enough to follow a change within a few refreshes.
const rateWindow = 5 * time.Second

// sample is the per-topic counters at one time.
type sample struct {
	at time.Time
	c  map[string]broker.TopicCounters
}

// sampler keeps the counters' recent samples (one a second, the last
// rateWindow and one more) to turn cumulative counters into rates.
type sampler struct {
	b  *broker.Broker
	mu sync.Mutex
	ss []sample
}

// take records one sample and drops those older than the window needs.
func (r *sampler) take() {
	s := sample{at: r.b.Now(), c: r.b.TopicCounters()}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ss = append(r.ss, s)
	for len(r.ss) > 2 && s.at.Sub(r.ss[1].at) >= rateWindow {
		r.ss = r.ss[1:]
	}
}

// rates returns the current counters with rates between the oldest sample
// in the window and now.
func (r *sampler) rates() map[string]TopicRates {
	now, cur := r.b.Now(), r.b.TopicCounters()
	r.mu.Lock()
	var old *sample
	if len(r.ss) > 0 {
		old = &r.ss[0]
	}
	r.mu.Unlock()
	out := make(map[string]TopicRates, len(cur))
	for topic, c := range cur {
		tr := TopicRates{TopicCounters: c}
		if old != nil {
			if secs := now.Sub(old.at).Seconds(); secs >= 0.5 {
				o := old.c[topic]
				tr.BytesInPerSec = float64(c.BytesIn-o.BytesIn) / secs
				tr.RecordsInPerSec = float64(c.RecordsIn-o.RecordsIn) / secs
				tr.BytesOutPerSec = float64(c.BytesOut-o.BytesOut) / secs
				tr.RecordsOutPerSec = float64(c.RecordsOut-o.RecordsOut) / secs
			}
		}
		out[topic] = tr
	}
	return out
}

// run samples every second until stop is closed.
func (r *sampler) run(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	r.take()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.take()
		}
	}
}

// sortedKeys returns m's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
