// Package status serves the HTTP side of a node: the cluster console
// (/status, an HTML page rendered by its own script), the JSON API under
// /api/v1/ and /metrics (Prometheus). Every node serves the same cluster
// view: its metadata image merged with the other brokers' own views
// (/api/v1/node), fetched over HTTP in parallel with a short timeout
// (cluster.go). See docs/console.md.
package status

import (
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-io/sluice/internal/broker"
)

// Replica is one replica of a partition. In a node's own view
// (/api/v1/node) it is the replica as the local leader sees it; in the
// cluster views it is merged from every broker reached (mergePartition).
type Replica struct {
	ID            int32 `json:"id"`
	LogEndOffset  int64 `json:"logEndOffset"`  // -1 if unknown
	HighWatermark int64 `json:"highWatermark"` // -1 if unknown
	InSync        bool  `json:"inSync"`
	// LastCaughtUpMs is the last time (Unix ms) the replica was caught up
	// with the leader; -1 if unknown.
	LastCaughtUpMs int64 `json:"lastCaughtUpMs"`
	// Status is the replica's state in the cluster view: leader, in-sync,
	// out-of-sync, fenced, shutting-down or unreachable (its broker did
	// not answer: no offsets are shown rather than stale ones). Empty in
	// a node's own view.
	Status string `json:"status,omitempty"`
	// Lag is the leader's LEO minus this replica's (-1 if unknown).
	Lag int64 `json:"lag"`
	// Source says whose report the offsets come from: "leader" (the
	// leader's record of the follower's fetches, consistent with the
	// leader's own LEO and HW) or "self" (the replica's own node).
	Source string `json:"source,omitempty"`
}

// Partition is the JSON shape of one partition in /api/v1/partitions and
// /api/v1/node.
type Partition struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	// ELR and LastKnownELR are the eligible leader replicas and the last
	// known leader (KIP-966), empty when the ISR is at min ISR.
	ELR          []int32 `json:"elr,omitempty"`
	LastKnownELR []int32 `json:"lastKnownElr,omitempty"`
	// Role is this node's role for the partition (leader, follower; none
	// in the cluster view when it hosts no replica).
	Role string `json:"role"`
	// LogStartOffset, LogEndOffset and HighWatermark are this node's
	// replica's; in the cluster view, the leader's when this node hosts
	// no replica (-1 if unknown).
	LogStartOffset int64     `json:"logStartOffset"`
	LogEndOffset   int64     `json:"logEndOffset"`
	HighWatermark  int64     `json:"highWatermark"`
	ReplicaStates  []Replica `json:"replicaStates"`

	// The fields below are filled in the cluster view only.

	// LeaderLogEndOffset and LeaderHighWatermark are the leader's, as it
	// reported them (-1 if the leader was not reached).
	LeaderLogEndOffset  int64 `json:"leaderLogEndOffset"`
	LeaderHighWatermark int64 `json:"leaderHighWatermark"`
	// LastStableOffset is the LSO (read_committed consumers read below
	// it: the first offset of the oldest transaction not yet decided and
	// replicated, else the HW) and OpenTransactions the ongoing
	// transactions with records here: a stuck LSO shows as an LSO far
	// below the HW (docs/transactions.md). Null when no replica was read.
	LastStableOffset *int64 `json:"lastStableOffset"`
	OpenTransactions int    `json:"openTransactions,omitempty"`
	MinISR           int    `json:"minIsr,omitempty"`
	// UnderReplicated: the ISR is smaller than the replica set.
	// UnderMinISR: smaller than min.insync.replicas (acks=all fails).
	// Offline: no leader, or its broker is fenced or unreachable.
	UnderReplicated bool `json:"underReplicated"`
	UnderMinISR     bool `json:"underMinIsr"`
	Offline         bool `json:"offline"`
	// DirtyRatio is set for a compacted topic (cleanup.policy contains
	// compact): the share of its log's cleanable bytes the log cleaner has
	// not cleaned yet, on this node's replica (in the cluster view, the
	// leader's when this node has none; docs/compaction.md).
	DirtyRatio *float64 `json:"dirtyRatio,omitempty"`
}

// Snapshot collects every local partition's state. For partitions led
// here, each replica's LEO and last-caught-up time are the leader's view
// (from the followers' fetches); elsewhere only the local replica is known.
func Snapshot(b *broker.Broker) []Partition {
	img := b.Image()
	var out []Partition
	for _, name := range img.TopicNames() {
		t := img.Topics[name]
		for _, mp := range t.Partitions {
			// No wait for lagging metadata: a page over thousands of
			// partitions must not wait once per partition not open yet.
			p, err := b.PartitionBy(name, mp.Index, time.Time{})
			if err != nil {
				continue
			}
			st := p.Status(mp.Replicas)
			sp := Partition{
				Topic: name, Partition: mp.Index, Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch,
				Replicas: mp.Replicas, ISR: mp.ISR, ELR: mp.ELR, LastKnownELR: mp.LastKnownELR, Role: st.Role,
				LogStartOffset: st.LogStart, LogEndOffset: st.LEO, HighWatermark: st.HW,
				LeaderLogEndOffset: -1, LeaderHighWatermark: -1,
			}
			if st.Compacted {
				sp.DirtyRatio = &st.DirtyRatio
			}
			lso := st.LSO
			sp.LastStableOffset, sp.OpenTransactions = &lso, st.OpenTxns
			isr := map[int32]bool{}
			for _, id := range mp.ISR {
				isr[id] = true
			}
			for _, id := range mp.Replicas {
				rs := Replica{ID: id, LogEndOffset: -1, HighWatermark: -1, InSync: isr[id], LastCaughtUpMs: -1, Lag: -1}
				switch {
				case id == b.NodeID():
					rs.LogEndOffset, rs.HighWatermark = st.LEO, st.HW
					if st.Role == "leader" {
						rs.LastCaughtUpMs = b.Now().UnixMilli()
					}
				case st.Role == "leader":
					if leo, ok := st.FollowerLEO[id]; ok {
						rs.LogEndOffset = leo
						rs.HighWatermark = min(leo, st.HW)
					}
					if t, ok := st.FollowerCaughtUp[id]; ok && t > 0 {
						rs.LastCaughtUpMs = t
					}
				}
				sp.ReplicaStates = append(sp.ReplicaStates, rs)
			}
			out = append(out, sp)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// collector exports per-partition offsets and cluster-level gauges.
type collector struct {
	b                           *broker.Broker
	leo, hw, start, underRepl   *prometheus.Desc
	lsoLag, openTxns            *prometheus.Desc
	offline, partitions, topics *prometheus.Desc
	// Per-topic produce and fetch totals (broker.TopicCounters).
	bytesIn, recordsIn, bytesOut, recordsOut *prometheus.Desc
}

func newCollector(b *broker.Broker) *collector {
	labels := []string{"topic", "partition"}
	return &collector{
		b:          b,
		leo:        prometheus.NewDesc("sluice_partition_log_end_offset", "Log end offset of the local replica.", labels, nil),
		hw:         prometheus.NewDesc("sluice_partition_high_watermark", "High watermark of the local replica.", labels, nil),
		start:      prometheus.NewDesc("sluice_partition_log_start_offset", "Log start offset of the local replica.", labels, nil),
		lsoLag:     prometheus.NewDesc("sluice_partition_lso_lag", "High watermark minus last stable offset of a partition led here: records read_committed consumers cannot read yet (a stuck transaction shows as a growing lag).", labels, nil),
		openTxns:   prometheus.NewDesc("sluice_partition_open_transactions", "Ongoing transactions with records in a partition led here.", labels, nil),
		underRepl:  prometheus.NewDesc("sluice_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set (UnderReplicatedPartitions).", nil, nil),
		offline:    prometheus.NewDesc("sluice_offline_partitions", "Partitions with no leader (OfflinePartitionsCount).", nil, nil),
		partitions: prometheus.NewDesc("sluice_partitions", "Partitions hosted on this node.", nil, nil),
		topics:     prometheus.NewDesc("sluice_topics", "Topics in the cluster.", nil, nil),
		bytesIn:    prometheus.NewDesc("sluice_topic_bytes_in_total", "Record batch bytes appended here as leader, by topic (BytesInPerSec).", []string{"topic"}, nil),
		recordsIn:  prometheus.NewDesc("sluice_topic_records_in_total", "Records appended here as leader, by topic (MessagesInPerSec).", []string{"topic"}, nil),
		bytesOut:   prometheus.NewDesc("sluice_topic_bytes_out_total", "Record bytes returned to consumers (not followers), by topic (BytesOutPerSec).", []string{"topic"}, nil),
		recordsOut: prometheus.NewDesc("sluice_topic_records_out_total", "Records returned to consumers (not followers), by topic.", []string{"topic"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leo, c.hw, c.start, c.lsoLag, c.openTxns, c.underRepl, c.offline, c.partitions, c.topics,
		c.bytesIn, c.recordsIn, c.bytesOut, c.recordsOut} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := Snapshot(c.b)
	under, offline := 0, 0
	for _, p := range snap {
		part := strconv.Itoa(int(p.Partition))
		ch <- prometheus.MustNewConstMetric(c.leo, prometheus.GaugeValue, float64(p.LogEndOffset), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(p.HighWatermark), p.Topic, part)
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(p.LogStartOffset), p.Topic, part)
		if p.Role == "leader" && p.LastStableOffset != nil {
			ch <- prometheus.MustNewConstMetric(c.lsoLag, prometheus.GaugeValue, float64(p.HighWatermark-*p.LastStableOffset), p.Topic, part)
			ch <- prometheus.MustNewConstMetric(c.openTxns, prometheus.GaugeValue, float64(p.OpenTransactions), p.Topic, part)
		}
		if p.Leader == c.b.NodeID() && len(p.ISR) < len(p.Replicas) {
			under++
		}
		if p.Leader < 0 {
			offline++
		}
	}
	ch <- prometheus.MustNewConstMetric(c.underRepl, prometheus.GaugeValue, float64(under))
	ch <- prometheus.MustNewConstMetric(c.offline, prometheus.GaugeValue, float64(offline))
	ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(len(snap)))
	ch <- prometheus.MustNewConstMetric(c.topics, prometheus.GaugeValue, float64(len(c.b.Image().Topics)))
	for topic, tc := range c.b.TopicCounters() {
		ch <- prometheus.MustNewConstMetric(c.bytesIn, prometheus.CounterValue, float64(tc.BytesIn), topic)
		ch <- prometheus.MustNewConstMetric(c.recordsIn, prometheus.CounterValue, float64(tc.RecordsIn), topic)
		ch <- prometheus.MustNewConstMetric(c.bytesOut, prometheus.CounterValue, float64(tc.BytesOut), topic)
		ch <- prometheus.MustNewConstMetric(c.recordsOut, prometheus.CounterValue, float64(tc.RecordsOut), topic)
	}
}
