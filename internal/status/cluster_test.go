package status

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/metadata"
)

// threeBrokers is an image of brokers 1-3 (3 fenced) with one RF 3
// partition led by 1 whose ISR dropped 3.
func threeBrokers() *metadata.Image {
	im := metadata.NewImage()
	for id := int32(1); id <= 3; id++ {
		im.Brokers[id] = metadata.Broker{ID: id, Host: "127.0.0.1", Port: 9090 + id, HTTP: "h", Fenced: id == 3}
	}
	im.Topics["t"] = &metadata.Topic{Name: "t", Partitions: []metadata.Partition{
		{Index: 0, Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}},
	}}
	return im
}

// replica is the local view of partition t/0 on one node.
func replica(role string, leo, hw int64, followers ...Replica) Partition {
	return Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 4, Role: role, LogEndOffset: leo, HighWatermark: hw, ReplicaStates: followers}
}

func TestBuildClusterMergesViewsAndHidesDeadReplicas(t *testing.T) {
	im := threeBrokers()
	leader := replica("leader", 100, 90,
		Replica{ID: 1, LogEndOffset: 100, HighWatermark: 90, LastCaughtUpMs: 5},
		Replica{ID: 2, LogEndOffset: 90, HighWatermark: 90, LastCaughtUpMs: 4},
		// The leader still remembers node 3's last fetch: it must not
		// be shown, node 3 did not answer.
		Replica{ID: 3, LogEndOffset: 70, HighWatermark: 70, LastCaughtUpMs: 1})
	g := group.Summary{ID: "g", State: "Stable", Members: []group.MemberSummary{{ID: "m", ClientID: "c1",
		Assigned: []group.TopicPartition{{Topic: "t", Partition: 0}}}},
		Offsets: []group.CommittedOffset{{Topic: "t", Partition: 0, Offset: 60}}}
	peers := map[int32]peer{
		1: {view: &NodeView{NodeID: 1, Controller: 2, Partitions: []Partition{leader},
			Topics: map[string]TopicRates{"t": {BytesInPerSec: 10, RecordsInPerSec: 1}}}},
		2: {view: &NodeView{NodeID: 2, Controller: 2, Version: "v9", Partitions: []Partition{replica("follower", 95, 88)},
			Groups: []group.Summary{g}, Topics: map[string]TopicRates{"t": {BytesOutPerSec: 5}}}},
		3: {err: "connection refused"},
	}
	v := buildCluster(im, 1, peers, func(*metadata.Topic) int { return 3 })
	if v.Controller != 2 || len(v.Brokers) != 3 || !v.Brokers[1].Controller || v.Brokers[1].Version != "v9" {
		t.Fatalf("brokers %+v controller %d", v.Brokers, v.Controller)
	}
	if b := v.Brokers[2]; b.Status != BrokerFenced || b.Reachable || b.Error != "connection refused" {
		t.Errorf("broker 3: %+v", b)
	}
	if v.Summary.AliveBrokers != 2 || v.Summary.UnderReplicated != 1 || v.Summary.UnderMinISR != 1 || v.Summary.Offline != 0 {
		t.Errorf("summary %+v", v.Summary)
	}
	p := v.Partitions[0]
	if p.Role != "leader" || p.LeaderLogEndOffset != 100 || p.LeaderHighWatermark != 90 || !p.UnderReplicated || !p.UnderMinISR || p.LastStableOffset != nil {
		t.Errorf("partition %+v", p)
	}
	want := []Replica{
		{ID: 1, LogEndOffset: 100, HighWatermark: 90, InSync: true, LastCaughtUpMs: 5, Status: ReplicaLeader, Lag: 0, Source: "leader"},
		// The leader's record of the follower (consistent with its own
		// LEO), the follower's own HW.
		{ID: 2, LogEndOffset: 90, HighWatermark: 88, InSync: true, LastCaughtUpMs: 4, Status: ReplicaInSync, Lag: 10, Source: "leader"},
		{ID: 3, LogEndOffset: -1, HighWatermark: -1, LastCaughtUpMs: -1, Status: ReplicaFenced, Lag: -1},
	}
	for i, r := range p.ReplicaStates {
		if r != want[i] {
			t.Errorf("replica %d: %+v, want %+v", r.ID, r, want[i])
		}
	}
	if len(v.Groups) != 1 || v.Groups[0].Coordinator != 2 || v.Groups[0].TotalLag != 30 ||
		v.Groups[0].Lag[0] != (GroupLag{Topic: "t", Partition: 0, Committed: 60, HighWatermark: 90, Lag: 30, Owner: "c1"}) {
		t.Errorf("groups %+v", v.Groups)
	}
	if tv := v.Topics[0]; tv.BytesInPerSec != 10 || tv.BytesOutPerSec != 5 || tv.ReplicationFactor != 3 || tv.UnderReplicated != 1 {
		t.Errorf("topic %+v", tv)
	}

	// The leader unreachable (not yet fenced): the partition is offline,
	// the follower's own LEO is shown, and no lag (no leader LEO).
	peers[1] = peer{err: "timeout"}
	v = buildCluster(im, 2, peers, func(*metadata.Topic) int { return 2 })
	p = v.Partitions[0]
	if !p.Offline || p.LeaderLogEndOffset != -1 || p.Role != "follower" || p.LogEndOffset != 95 || v.Summary.Offline != 1 || v.Summary.UnderMinISR != 0 {
		t.Errorf("leader unreachable: %+v summary %+v", p, v.Summary)
	}
	if r := p.ReplicaStates[0]; r.Status != ReplicaUnreachable || r.LogEndOffset != -1 {
		t.Errorf("unreachable leader: %+v", r)
	}
	if r := p.ReplicaStates[1]; r.LogEndOffset != 95 || r.Source != "self" || r.Lag != -1 {
		t.Errorf("follower without its leader: %+v", r)
	}
}

func TestFetchPeersMarksSilentBrokersUnreachable(t *testing.T) {
	b := openTestBroker(t)
	s := New(Options{Broker: b, PeerTimeout: 300 * time.Millisecond})
	defer s.Close()
	// Node 2 answers; node 3 accepts connections and never answers;
	// node 4 answers as someone else; node 5 registered no HTTP address.
	two := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/node" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(NodeView{NodeID: 2, Version: "v2"})
	}))
	defer two.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	four := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(NodeView{NodeID: 9})
	}))
	defer four.Close()
	im := b.Image().Clone()
	im.Brokers[2] = metadata.Broker{ID: 2, HTTP: strings.TrimPrefix(two.URL, "http://")}
	im.Brokers[3] = metadata.Broker{ID: 3, HTTP: silent.Addr().String()}
	im.Brokers[4] = metadata.Broker{ID: 4, HTTP: strings.TrimPrefix(four.URL, "http://")}
	im.Brokers[5] = metadata.Broker{ID: 5}
	t0 := time.Now()
	peers := s.fetchPeers(context.Background(), im)
	took := time.Since(t0)
	if took > 2*time.Second {
		t.Errorf("fan-out took %v with a 300ms peer timeout", took)
	}
	if p := peers[1]; p.view == nil || p.view.NodeID != 1 {
		t.Errorf("self: %+v", p)
	}
	if p := peers[2]; p.view == nil || p.view.Version != "v2" {
		t.Errorf("node 2: %+v", p)
	}
	if p := peers[3]; p.view != nil || !strings.Contains(p.err, "no answer within") {
		t.Errorf("silent node 3: %+v", p)
	}
	if p := peers[4]; p.view != nil || !strings.Contains(p.err, "answers as node 9") {
		t.Errorf("node 4: %+v", p)
	}
	if p := peers[5]; p.view != nil || p.err != "no HTTP address registered" {
		t.Errorf("node 5: %+v", p)
	}
	v := buildCluster(im, 1, peers, s.b.MinISR)
	for _, bv := range v.Brokers {
		if want := map[int32]string{1: BrokerAlive, 2: BrokerAlive, 3: BrokerUnreachable, 4: BrokerUnreachable, 5: BrokerUnreachable}[bv.ID]; bv.Status != want {
			t.Errorf("broker %d: %s, want %s", bv.ID, bv.Status, want)
		}
	}
}

func TestRatesFromSampledCounters(t *testing.T) {
	// The broker's tick loop reads the clock too.
	var nowNs atomic.Int64
	nowNs.Store(time.Unix(1000, 0).UnixNano())
	advance := func(d time.Duration) { nowNs.Add(int64(d)) }
	b := openTestBrokerClock(t, func() time.Time { return time.Unix(0, nowNs.Load()) })
	r := &sampler{b: b}
	b.CountProduce("t", 1000, 10)
	r.take()
	if got := r.rates()["t"]; got.BytesIn != 1000 || got.BytesInPerSec != 0 {
		t.Fatalf("one sample: %+v", got)
	}
	advance(2 * time.Second)
	b.CountProduce("t", 3000, 30)
	b.CountFetch("t", 500, 4)
	r.take()
	got := r.rates()["t"]
	if got.BytesInPerSec != 1500 || got.RecordsInPerSec != 15 || got.BytesOutPerSec != 250 || got.RecordsOutPerSec != 2 || got.RecordsIn != 40 {
		t.Fatalf("rates %+v", got)
	}
	// Samples older than the window are dropped: with nothing new
	// for 10 s the rates fall to 0.
	for range 10 {
		advance(time.Second)
		r.take()
	}
	if got := r.rates()["t"]; got.BytesInPerSec != 0 || got.BytesIn != 4000 {
		t.Fatalf("idle: %+v", got)
	}
}
