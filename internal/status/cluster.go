package status

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/metadata"
)

// ClusterView is the console's whole picture (/api/v1/cluster): the
// committed metadata image of the node answering, merged with every
// broker's NodeView fetched over HTTP at the same moment.
type ClusterView struct {
	// GeneratedAtMs is when the snapshot was taken (Unix ms); ObservedBy
	// is the node that took it.
	GeneratedAtMs  int64  `json:"generatedAtMs"`
	ObservedBy     int32  `json:"observedBy"`
	ClusterID      string `json:"clusterId"`
	MetadataOffset int64  `json:"metadataOffset"`
	// Controller is the active controller's id (-1 if unknown).
	Controller int32        `json:"controller"`
	Summary    Summary      `json:"summary"`
	Brokers    []BrokerView `json:"brokers"`
	Topics     []TopicView  `json:"topics"`
	Partitions []Partition  `json:"partitions"`
	Groups     []GroupView  `json:"groups"`
	// Transactions are the open transactions of every coordinator
	// reached (a partition's LastStableOffset and OpenTransactions show
	// the same transactions from the partition's side).
	Transactions []TransactionView `json:"transactions"`
}

// Summary counts what needs attention.
type Summary struct {
	Brokers      int `json:"brokers"`
	AliveBrokers int `json:"aliveBrokers"`
	// Topics counts the user topics; InternalTopics those whose name
	// starts with "__" (__consumer_offsets, __transaction_state), as
	// sluice cluster status counts them. Partitions counts both.
	Topics          int `json:"topics"`
	InternalTopics  int `json:"internalTopics"`
	Partitions      int `json:"partitions"`
	UnderReplicated int `json:"underReplicated"`
	UnderMinISR     int `json:"underMinIsr"`
	Offline         int `json:"offline"`
	// The partitions behind each count, as "topic/partition".
	UnderReplicatedPartitions []string `json:"underReplicatedPartitions"`
	UnderMinISRPartitions     []string `json:"underMinIsrPartitions"`
	OfflinePartitions         []string `json:"offlinePartitions"`
}

// Broker states in BrokerView.Status.
const (
	BrokerAlive        = "alive"
	BrokerFenced       = "fenced"
	BrokerShuttingDown = "shutting-down"
	BrokerUnreachable  = "unreachable"
)

// BrokerView is one registered broker.
type BrokerView struct {
	ID    int32  `json:"id"`
	Kafka string `json:"kafka"` // advertised host:port
	HTTP  string `json:"http"`  // registered --http address ("" if none)
	Rack  string `json:"rack,omitempty"`
	Epoch int64  `json:"epoch"`
	// Status is fenced or shutting-down from the metadata image, else
	// unreachable when its HTTP API did not answer, else alive.
	Status    string `json:"status"`
	Fenced    bool   `json:"fenced"`
	Reachable bool   `json:"reachable"`
	// Error says why the broker was not reached.
	Error      string `json:"error,omitempty"`
	Controller bool   `json:"controller"` // the active controller
	Voter      bool   `json:"voter"`
	Version    string `json:"version,omitempty"`
	StartedMs  int64  `json:"startedMs,omitempty"`
	// MetadataOffset is the metadata offset the broker has applied.
	MetadataOffset int64 `json:"metadataOffset"`
	// LatencyMs is how long its NodeView took to arrive.
	LatencyMs int64 `json:"latencyMs"`
	// Leaders and Replicas count the partitions it leads and hosts.
	Leaders  int `json:"leaders"`
	Replicas int `json:"replicas"`
	// Strays are its stray partition directories (NodeView.Strays).
	Strays []broker.Stray `json:"strays,omitempty"`
}

// TopicView is one topic with its rates summed over the brokers reached.
type TopicView struct {
	Name              string            `json:"name"`
	ID                string            `json:"id"`
	Partitions        int               `json:"partitions"`
	ReplicationFactor int               `json:"replicationFactor"`
	MinISR            int               `json:"minIsr"`
	Internal          bool              `json:"internal"`
	Configs           map[string]string `json:"configs,omitempty"`
	UnderReplicated   int               `json:"underReplicated"`
	TopicRates
}

// GroupView is one consumer group with its lag per partition.
type GroupView struct {
	group.Summary
	// Coordinator is the node coordinating the group.
	Coordinator int32 `json:"coordinator"`
	// Lag is each committed partition's lag: the partition's high
	// watermark (what a consumer can read) minus the committed offset.
	// For a share group it is each share partition loaded on its
	// partition's leader (SharePartition): Committed is the
	// share-partition start offset, InFlight the records locked for
	// members, and the lag leaves out the records acknowledged or
	// archived above the start offset.
	Lag      []GroupLag `json:"lag"`
	TotalLag int64      `json:"totalLag"`
}

// GroupLag is a group's position in one partition.
type GroupLag struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Committed     int64  `json:"committed"`
	HighWatermark int64  `json:"highWatermark"` // -1 if unknown
	Lag           int64  `json:"lag"`           // -1 if unknown
	Owner         string `json:"owner,omitempty"`
	// InFlight is a share group's records locked for members here.
	InFlight int `json:"inFlight,omitempty"`
}

// peer is one broker's answer (or its absence).
type peer struct {
	view    *NodeView
	err     string
	latency time.Duration
}

// fetchPeers gets every other broker's NodeView in parallel, each bounded
// by the peer timeout; this node's own view is taken in-process.
func (s *Server) fetchPeers(ctx context.Context, im *metadata.Image) map[int32]peer {
	out := map[int32]peer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	self := s.b.NodeID()
	set := func(id int32, p peer) {
		mu.Lock()
		out[id] = p
		mu.Unlock()
	}
	for id, br := range im.Brokers {
		if id == self {
			t0 := time.Now()
			v := s.nodeView()
			set(id, peer{view: &v, latency: time.Since(t0)})
			continue
		}
		if br.HTTP == "" {
			set(id, peer{err: "no HTTP address registered"})
			continue
		}
		wg.Add(1)
		go func(id int32, addr string) {
			defer wg.Done()
			t0 := time.Now()
			v, err := s.getNode(ctx, addr)
			p := peer{view: v, latency: time.Since(t0)}
			if err != nil {
				p.view, p.err = nil, err.Error()
			} else if v.NodeID != id {
				p.view, p.err = nil, fmt.Sprintf("%s answers as node %d", addr, v.NodeID)
			}
			set(id, p)
		}(id, br.HTTP)
	}
	wg.Wait()
	return out
}

// getNode fetches one broker's /api/v1/node.
func (s *Server) getNode(ctx context.Context, addr string) (*NodeView, error) {
	ctx, cancel := context.WithTimeout(ctx, s.peerTimeout)
	defer cancel()
	scheme := "http://"
	if s.peerTLS != nil {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+addr+"/api/v1/node", nil)
	if err != nil {
		return nil, err
	}
	if s.peerToken != nil {
		if tok := s.peerToken(); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no answer within %v", s.peerTimeout)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	var v NodeView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Cluster returns the cluster view, reusing one taken less than
// cacheFor ago: several consoles polling every second cost one fan-out.
func (s *Server) Cluster(ctx context.Context) *ClusterView {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.cached != nil && time.Since(s.cachedAt) < cacheFor {
		return s.cached
	}
	im := s.b.Image()
	v := buildCluster(im, s.b.NodeID(), s.fetchPeers(ctx, im), s.b.MinISR)
	v.GeneratedAtMs = s.b.Now().UnixMilli()
	s.cached, s.cachedAt = v, time.Now()
	return v
}

// cacheFor is how long a cluster view is reused.
const cacheFor = 500 * time.Millisecond

// tpKey names a partition as "topic/partition".
func tpKey(topic string, p int32) string { return topic + "/" + strconv.Itoa(int(p)) }

// buildCluster merges the image and the brokers' views. minISR gives a
// topic's min.insync.replicas.
func buildCluster(im *metadata.Image, self int32, peers map[int32]peer, minISR func(*metadata.Topic) int) *ClusterView {
	v := &ClusterView{ObservedBy: self, ClusterID: im.ClusterID, MetadataOffset: im.Offset, Controller: -1,
		Brokers: []BrokerView{}, Topics: []TopicView{}, Partitions: []Partition{}, Groups: []GroupView{}, Transactions: []TransactionView{}}
	if p := peers[self]; p.view != nil {
		v.Controller = p.view.Controller
	}
	// local[node][tp] is each reached node's own replica state.
	local := map[int32]map[string]*Partition{}
	for id, p := range peers {
		if p.view == nil {
			continue
		}
		m := map[string]*Partition{}
		for i := range p.view.Partitions {
			lp := &p.view.Partitions[i]
			m[tpKey(lp.Topic, lp.Partition)] = lp
		}
		local[id] = m
	}
	status := map[int32]string{}
	for _, id := range im.BrokerIDs() {
		br := im.Brokers[id]
		p := peers[id]
		bv := BrokerView{ID: id, Kafka: net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port))), HTTP: br.HTTP, Rack: br.Rack,
			Epoch: br.Epoch, Fenced: br.Fenced, Reachable: p.view != nil, Error: p.err, Controller: id == v.Controller,
			MetadataOffset: -1, LatencyMs: p.latency.Milliseconds()}
		if p.view != nil {
			bv.Version, bv.StartedMs, bv.MetadataOffset, bv.Voter = p.view.Version, p.view.StartedMs, p.view.MetadataOffset, p.view.Voter
			bv.Strays = p.view.Strays
		}
		switch {
		case br.Fenced:
			bv.Status = BrokerFenced
		case br.ShuttingDown:
			bv.Status = BrokerShuttingDown
		case p.view == nil:
			bv.Status = BrokerUnreachable
		default:
			bv.Status = BrokerAlive
		}
		status[id] = bv.Status
		if bv.Status == BrokerAlive {
			v.Summary.AliveBrokers++
		}
		v.Brokers = append(v.Brokers, bv)
	}
	hw := map[string]int64{}
	for _, name := range im.TopicNames() {
		t := im.Topics[name]
		tv := TopicView{Name: name, ID: t.ID.String(), Partitions: len(t.Partitions), MinISR: minISR(t),
			Internal: len(name) > 1 && name[:2] == "__", Configs: t.Configs}
		for _, mp := range t.Partitions {
			tv.ReplicationFactor = max(tv.ReplicationFactor, len(mp.Replicas))
			p := mergePartition(name, &mp, self, local, status, tv.MinISR)
			key := tpKey(name, mp.Index)
			hw[key] = p.LeaderHighWatermark
			if p.UnderReplicated {
				tv.UnderReplicated++
				v.Summary.UnderReplicatedPartitions = append(v.Summary.UnderReplicatedPartitions, key)
			}
			if p.UnderMinISR {
				v.Summary.UnderMinISRPartitions = append(v.Summary.UnderMinISRPartitions, key)
			}
			if p.Offline {
				v.Summary.OfflinePartitions = append(v.Summary.OfflinePartitions, key)
			}
			for i := range v.Brokers {
				if v.Brokers[i].ID == mp.Leader {
					v.Brokers[i].Leaders++
				}
				if mp.HasReplica(v.Brokers[i].ID) {
					v.Brokers[i].Replicas++
				}
			}
			v.Partitions = append(v.Partitions, p)
		}
		// Produce counts only on a partition's leader and fetch on the node
		// serving it, so summing the nodes' rates gives the cluster's.
		for _, id := range sortedIDs(peers) {
			if pv := peers[id].view; pv != nil {
				r := pv.Topics[name]
				tv.BytesIn += r.BytesIn
				tv.RecordsIn += r.RecordsIn
				tv.BytesOut += r.BytesOut
				tv.RecordsOut += r.RecordsOut
				tv.BytesInPerSec += r.BytesInPerSec
				tv.RecordsInPerSec += r.RecordsInPerSec
				tv.BytesOutPerSec += r.BytesOutPerSec
				tv.RecordsOutPerSec += r.RecordsOutPerSec
			}
		}
		v.Topics = append(v.Topics, tv)
	}
	v.Groups = mergeGroups(peers, hw)
	v.Transactions = mergeTransactions(peers)
	s := &v.Summary
	s.Brokers, s.Partitions = len(im.Brokers), len(v.Partitions)
	for _, t := range v.Topics {
		if t.Internal {
			s.InternalTopics++
		} else {
			s.Topics++
		}
	}
	s.UnderReplicated, s.UnderMinISR, s.Offline = len(s.UnderReplicatedPartitions), len(s.UnderMinISRPartitions), len(s.OfflinePartitions)
	for _, l := range []*[]string{&s.UnderReplicatedPartitions, &s.UnderMinISRPartitions, &s.OfflinePartitions} {
		if *l == nil {
			*l = []string{}
		}
	}
	return v
}

// sortedIDs returns the peers' ids in order.
func sortedIDs(peers map[int32]peer) []int32 {
	ids := make([]int32, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// mergeGroups joins the groups of every coordinator reached with the
// partitions' high watermarks. A group reported by two nodes (during a
// coordinator move) is taken from the lower node id.
func mergeGroups(peers map[int32]peer, hw map[string]int64) []GroupView {
	out := []GroupView{}
	seen := map[string]bool{}
	for _, id := range sortedIDs(peers) {
		pv := peers[id].view
		if pv == nil {
			continue
		}
		for _, g := range pv.Groups {
			if seen[g.ID] {
				continue
			}
			seen[g.ID] = true
			gv := GroupView{Summary: g, Coordinator: id, Lag: []GroupLag{}}
			owner := map[string]string{}
			for _, m := range g.Members {
				for _, tp := range m.Assigned {
					owner[tpKey(tp.Topic, tp.Partition)] = m.ClientID
				}
			}
			if g.Type == "share" {
				for _, sid := range sortedIDs(peers) {
					if peers[sid].view == nil {
						continue
					}
					for _, sp := range peers[sid].view.SharePartitions {
						if sp.Group != g.ID {
							continue
						}
						l := GroupLag{Topic: sp.Topic, Partition: sp.Partition, Committed: sp.StartOffset, HighWatermark: sp.HighWatermark,
							Lag: sp.Lag, Owner: owner[tpKey(sp.Topic, sp.Partition)], InFlight: sp.InFlight}
						if l.Lag > 0 {
							gv.TotalLag += l.Lag
						}
						gv.Lag = append(gv.Lag, l)
					}
				}
			}
			for _, o := range g.Offsets {
				key := tpKey(o.Topic, o.Partition)
				l := GroupLag{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, HighWatermark: -1, Lag: -1, Owner: owner[key]}
				if h, ok := hw[key]; ok && h >= 0 {
					l.HighWatermark, l.Lag = h, max(h-o.Offset, 0)
					gv.TotalLag += l.Lag
				}
				gv.Lag = append(gv.Lag, l)
			}
			out = append(out, gv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
