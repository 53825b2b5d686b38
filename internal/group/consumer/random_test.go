package consumer

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// simClient is a KIP-848 client as the state machine sees it: the epoch
// of its last answer, the partitions it consumes, and the assignment it
// was last given (which it adopts, revoking and adding, some heartbeats
// later).
type simClient struct {
	id     string
	epoch  int32
	owned  Assignment
	target Assignment
	joined bool
}

// TestRandomGroups drives random members (joining, heartbeating late or
// early, leaving, crashing into a session timeout) and topic changes, and
// checks at every step that no partition is consumed by two clients at
// once and the coordinator never lists a partition under two members;
// then lets everyone heartbeat until the group is stable and checks that
// every member consumes exactly its target, every partition is consumed,
// and replaying the records gives the same state.
func TestRandomGroups(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomGroup(t, seed) })
	}
}

func randomGroup(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	img := &Image{Version: 1, Topics: map[string]TopicImage{
		"a": {ID: topicID("a"), Partitions: int32(r.IntN(6) + 1)},
		"b": {ID: topicID("b"), Partitions: int32(r.IntN(6) + 1)},
	}}
	assignor := []string{"uniform", "range"}[r.IntN(2)]
	mgr := NewManager(Config{})
	now := time.Unix(0, 0)
	var log []Record
	clients := map[string]*simClient{}
	var order []string
	next := 0

	heartbeat := func(c *simClient) {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version = 1
		req.Group, req.MemberID = "g", c.id
		req.RebalanceTimeoutMillis = -1
		if !c.joined {
			req.MemberEpoch = 0
			req.RebalanceTimeoutMillis = 10000
			req.SubscribedTopicNames = []string{"a", "b"}
			req.ServerAssignor = &assignor
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		} else {
			// Half the time the client has finished its reconciliation
			// before this heartbeat.
			if r.IntN(2) == 0 {
				c.owned = c.target.Clone()
			}
			req.MemberEpoch = c.epoch
			for tid, ps := range c.owned {
				req.Topics = append(req.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tid, Partitions: ps})
			}
			if req.Topics == nil {
				req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			}
		}
		resp, res := mgr.Heartbeat(now, img, Client{ID: c.id}, req)
		log = append(log, res.Records...)
		switch resp.ErrorCode {
		case 0:
		case kerr.FencedMemberEpoch.Code, kerr.UnknownMemberID.Code:
			// The client drops everything and rejoins.
			c.joined, c.epoch, c.owned, c.target = false, 0, Assignment{}, Assignment{}
			return
		default:
			t.Fatalf("heartbeat %s: %v %s", c.id, kerr.ErrorForCode(resp.ErrorCode), deref(resp.ErrorMessage))
		}
		c.joined = true
		c.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			var tps []TP
			for _, tp := range resp.Assignment.Topics {
				for _, p := range tp.Partitions {
					tps = append(tps, TP{tp.TopicID, p})
				}
			}
			// The client adopts it (revoking and adding) at a later
			// heartbeat; until then it consumes what it owned.
			c.target = assignmentOf(tps)
		}
	}
	check := func(step int) {
		consumer := map[TP]string{}
		for _, id := range order {
			c := clients[id]
			for _, tp := range c.owned.TPs() {
				if o, dup := consumer[tp]; dup {
					t.Fatalf("step %d: %v consumed by %s and %s", step, tp, o, id)
				}
				consumer[tp] = id
			}
		}
		if g := mgr.Group("g"); g != nil {
			owner := map[TP]string{}
			for id, m := range g.Members {
				for _, tp := range m.Assigned.union(m.PendingRevocation).TPs() {
					if o, dup := owner[tp]; dup {
						t.Fatalf("step %d: %v owned by %s and %s", step, tp, o, id)
					}
					owner[tp] = id
				}
			}
		}
	}

	for step := range 200 {
		now = now.Add(100 * time.Millisecond)
		switch op := r.IntN(20); {
		case op == 0 || len(order) == 0:
			c := &simClient{id: fmt.Sprintf("c%d", next), owned: Assignment{}, target: Assignment{}}
			next++
			clients[c.id] = c
			order = append(order, c.id)
			heartbeat(c)
		case op == 1:
			// A client leaves.
			i := r.IntN(len(order))
			c := clients[order[i]]
			if c.joined {
				req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
				req.Version, req.Group, req.MemberID, req.MemberEpoch = 1, "g", c.id, LeaveEpoch
				resp, res := mgr.Heartbeat(now, img, Client{}, req)
				if resp.ErrorCode != 0 {
					t.Fatalf("leave: %v", kerr.ErrorForCode(resp.ErrorCode))
				}
				log = append(log, res.Records...)
			}
			delete(clients, c.id)
			order = append(order[:i], order[i+1:]...)
		case op == 2:
			// A client crashes; its session expires.
			i := r.IntN(len(order))
			c := clients[order[i]]
			res := mgr.Expire(now, img, Timer{Kind: SessionTimer, Group: "g", Member: c.id})
			log = append(log, res.Records...)
			delete(clients, c.id)
			order = append(order[:i], order[i+1:]...)
		case op == 3:
			// Partitions are added to a topic.
			topics := map[string]TopicImage{}
			for k, v := range img.Topics {
				topics[k] = v
			}
			name := []string{"a", "b"}[r.IntN(2)]
			ti := topics[name]
			ti.Partitions += int32(r.IntN(3) + 1)
			topics[name] = ti
			img = &Image{Version: img.Version + 1, Topics: topics}
		default:
			heartbeat(clients[order[r.IntN(len(order))]])
		}
		check(step)
	}

	// Settle: everyone heartbeats, finishing its reconciliation.
	for round := 0; len(order) > 0; round++ {
		if round > 50 {
			t.Fatalf("no convergence: %s", mgr.Group("g").State())
		}
		for _, id := range order {
			c := clients[id]
			if c.joined {
				c.owned = c.target.Clone()
			}
			heartbeat(c)
			check(-1)
		}
		if g := mgr.Group("g"); g != nil && g.State() == StateStable {
			break
		}
	}
	g := mgr.Group("g")
	total := 0
	for _, id := range order {
		c := clients[id]
		c.owned = c.target.Clone()
		if !c.owned.Equal(g.Members[id].Assigned) || !g.Members[id].Assigned.Equal(g.Target[id]) && g.Target[id].Count()+g.Members[id].Assigned.Count() > 0 {
			t.Fatalf("%s consumes %v, owns %v, target %v", id, c.owned, g.Members[id].Assigned, g.Target[id])
		}
		total += c.owned.Count()
	}
	if want := int(img.Topics["a"].Partitions + img.Topics["b"].Partitions); len(order) > 0 && total != want {
		t.Fatalf("%d partitions consumed, want %d", total, want)
	}
	fresh := NewManager(Config{})
	for _, rec := range log {
		k, v := rec.Encode()
		if err := fresh.ReplayEncoded(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if diff := compareManagers(mgr, fresh); diff != "" {
		t.Fatalf("replay: %s", diff)
	}
}
