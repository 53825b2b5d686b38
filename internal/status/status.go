// Package status serves the HTTP side of a node: /api/v1/partitions (JSON),
// /status (an HTML page over the same data) and /metrics (Prometheus).
package status

import (
	"encoding/json"
	"html/template"
	"net/http"
	"net/http/pprof"
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/metrics"
)

// Replica is one replica of a partition as its leader sees it.
type Replica struct {
	ID            int32 `json:"id"`
	LogEndOffset  int64 `json:"logEndOffset"`
	HighWatermark int64 `json:"highWatermark"`
	InSync        bool  `json:"inSync"`
	// LastCaughtUpMs is the last time (Unix ms) the replica was caught up
	// with the leader; -1 if unknown.
	LastCaughtUpMs int64 `json:"lastCaughtUpMs"`
}

// Partition is the JSON shape of one partition in /api/v1/partitions.
type Partition struct {
	Topic       string  `json:"topic"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	// Role is this node's role for the partition (leader, follower).
	Role           string    `json:"role"`
	LogStartOffset int64     `json:"logStartOffset"`
	LogEndOffset   int64     `json:"logEndOffset"`
	HighWatermark  int64     `json:"highWatermark"`
	ReplicaStates  []Replica `json:"replicaStates"`
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
			p, err := b.Partition(name, mp.Index)
			if err != nil {
				continue
			}
			st := p.Status(mp.Replicas)
			sp := Partition{
				Topic: name, Partition: mp.Index, Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch,
				Replicas: mp.Replicas, ISR: mp.ISR, Role: st.Role,
				LogStartOffset: st.LogStart, LogEndOffset: st.LEO, HighWatermark: st.HW,
			}
			isr := map[int32]bool{}
			for _, id := range mp.ISR {
				isr[id] = true
			}
			for _, id := range mp.Replicas {
				rs := Replica{ID: id, LogEndOffset: -1, HighWatermark: -1, InSync: isr[id], LastCaughtUpMs: -1}
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

// Handler returns the node's HTTP handler.
func Handler(b *broker.Broker) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(b))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{metrics.Registry, reg}, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/api/v1/partitions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(Snapshot(b))
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		page.Execute(w, struct {
			Node       int32
			Partitions []Partition
		}{b.NodeID(), Snapshot(b)})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, "/status", http.StatusFound)
	})
	return mux
}

var page = template.Must(template.New("status").Funcs(template.FuncMap{
	"lag": func(p Partition, r Replica) int64 {
		if r.LogEndOffset < 0 {
			return -1
		}
		return p.LogEndOffset - r.LogEndOffset
	},
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="1"><title>sluice node {{.Node}}</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#eee}.out{background:#fdd}.in{background:#dfd}.unk{color:#999}</style>
</head><body><h1>sluice node {{.Node}}</h1>
<p>Each replica's log end offset (LEO) as the partition leader sees it from the followers' fetches; the high
watermark (HW) is the smallest LEO over the in-sync replicas, and consumers read only below it. Refreshes every second.</p>
<table><tr><th>topic</th><th>partition</th><th>leader</th><th>epoch</th><th>ISR</th><th>log start</th><th>HW</th><th>LEO</th><th>replicas (LEO / lag)</th></tr>
{{range $p := .Partitions}}<tr><td>{{$p.Topic}}</td><td>{{$p.Partition}}</td><td>{{$p.Leader}}</td><td>{{$p.LeaderEpoch}}</td><td>{{$p.ISR}}</td>
<td>{{$p.LogStartOffset}}</td><td>{{$p.HighWatermark}}</td><td>{{$p.LogEndOffset}}</td><td>{{range $p.ReplicaStates}}<span class="{{if .InSync}}in{{else}}out{{end}}">
{{.ID}}: {{if ge .LogEndOffset 0}}{{.LogEndOffset}} / {{lag $p .}}{{else}}<span class="unk">?</span>{{end}}</span> {{end}}</td></tr>
{{end}}</table></body></html>
`))

// collector exports per-partition offsets and cluster-level gauges.
type collector struct {
	b                           *broker.Broker
	leo, hw, start, underRepl   *prometheus.Desc
	offline, partitions, topics *prometheus.Desc
}

func newCollector(b *broker.Broker) *collector {
	labels := []string{"topic", "partition"}
	return &collector{
		b:          b,
		leo:        prometheus.NewDesc("sluice_partition_log_end_offset", "Log end offset of the local replica.", labels, nil),
		hw:         prometheus.NewDesc("sluice_partition_high_watermark", "High watermark of the local replica.", labels, nil),
		start:      prometheus.NewDesc("sluice_partition_log_start_offset", "Log start offset of the local replica.", labels, nil),
		underRepl:  prometheus.NewDesc("sluice_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set (UnderReplicatedPartitions).", nil, nil),
		offline:    prometheus.NewDesc("sluice_offline_partitions", "Partitions with no leader (OfflinePartitionsCount).", nil, nil),
		partitions: prometheus.NewDesc("sluice_partitions", "Partitions hosted on this node.", nil, nil),
		topics:     prometheus.NewDesc("sluice_topics", "Topics in the cluster.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leo, c.hw, c.start, c.underRepl, c.offline, c.partitions, c.topics} {
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
}
