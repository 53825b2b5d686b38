package sim

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/txn"
)

// Offset commits through the real group coordinator. Every broker runs
// internal/group in its stepped mode (group.Options.Stepped) over its
// replica of __consumer_offsets (one partition, RF 3, min ISR 2,
// compacted, created at the start); it fails over with that partition's
// leadership as the transaction coordinator does. A committer of a simple
// group (generation -1, no member: a consumer that assigns its partitions
// itself) commits ever larger offsets of t0-0 with OffsetCommit and reads
// them back with OffsetFetch, from the coordinator a FindCoordinator to an
// up broker names, retrying when it is not there or does not answer.
//
// Invariants: an acknowledged commit is never lost: every OffsetFetch
// answered, and the one after settling, returns at least the highest
// acknowledged offset; and no OffsetFetch returns less than an earlier one
// (a coordinator answers from its committed state, never from records it
// loaded above the high watermark, which a later leader may not have;
// docs/coordinators.md).

const realGroupID = "sim-group"

// simGroup is the committer and the world's side of the group
// coordinators.
type simGroup struct {
	coords  map[int32]*group.Coordinator
	next    int64 // the next offset to commit
	acked   int64 // the highest acknowledged commit
	fetched int64 // the highest offset an OffsetFetch returned
	settled bool  // the OffsetFetch after settling answered
	req     *coordReq
	retryAt time.Time
	commits int
}

func newSimGroup() *simGroup {
	return &simGroup{coords: map[int32]*group.Coordinator{}, next: 1, acked: -1, fetched: -1}
}

// newGroupCoordinator returns rb's stepped group coordinator.
func (w *realWorld) newGroupCoordinator(rb *realBroker) *group.Coordinator {
	c := group.New(rb.b, group.Options{Config: group.ConfigFrom(rb.b.Config()), Stepped: true})
	w.grp.coords[rb.id] = c
	return c
}

// createOffsetsTopic creates __consumer_offsets as the coordinator would
// (a stepped one does not: the creation waits for the metadata).
func (w *realWorld) createOffsetsTopic() {
	cfgs := map[string]string{"cleanup.policy": "compact", "segment.bytes": "4096", "min.insync.replicas": "2"}
	if err := w.brokers[0].b.CreateTopic(group.OffsetsTopic, 1, realBrokers, cfgs, false); err != nil {
		w.fail("create topic %s: %v", group.OffsetsTopic, err)
	}
}

// groupStep runs the group coordinators' ready work and moves the
// committer: its request's answer, or a new commit or fetch.
func (w *realWorld) groupStep(start bool) {
	g := w.grp
	for _, rb := range w.brokers {
		if c := g.coords[rb.id]; rb.up && c != nil {
			c.Drain()
		}
	}
	if r := g.req; r != nil {
		if r.poll() && g.req == r {
			g.req = nil
		}
		return
	}
	if w.clk.Now().Before(g.retryAt) || !w.chance(0.5) {
		return
	}
	node, c := w.groupCoordinator()
	if c == nil {
		g.retryAt = w.clk.Now().Add(realTxnRetry)
		return
	}
	if start && w.chance(0.5) {
		w.groupCommit(node, c)
	} else {
		w.groupFetch(node, c, "")
	}
}

// groupCoordinator finds the group's coordinator as a client does.
func (w *realWorld) groupCoordinator() (int32, *group.Coordinator) {
	up := w.upBrokers()
	if len(up) == 0 {
		return -1, nil
	}
	c := w.grp.coords[up[w.rng.IntN(len(up))].id]
	if c == nil {
		return -1, nil
	}
	node, _, _, err := c.Coordinator(realGroupID)
	if err != nil || node < 1 || node > realBrokers || !w.brokers[node-1].up || w.grp.coords[node] == nil {
		return -1, nil
	}
	return node, w.grp.coords[node]
}

// groupCommit commits the next offset of t0-0.
func (w *realWorld) groupCommit(node int32, c *group.Coordinator) {
	g := w.grp
	off := g.next
	g.next++
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, realGroupID, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t0"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 0, off, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	w.tracef("group commit of t0-0 at %d to coordinator %d", off, node)
	r := c.OffsetCommit(req)
	g.req = &coordReq{node: node, poll: poll(txn.Result[*kmsg.OffsetCommitResponse]{Resp: r.Resp, Wait: r.Wait, Poll: r.Poll}, func(resp *kmsg.OffsetCommitResponse) {
		code := resp.Topics[0].Partitions[0].ErrorCode
		if code != 0 {
			w.tracef("group commit of t0-0 at %d: %v", off, kerr.ErrorForCode(code))
			g.retryAt = w.clk.Now().Add(realTxnRetry)
			return
		}
		g.commits++
		g.acked = max(g.acked, off)
		w.tracef("group commit of t0-0 at %d acknowledged by %d", off, node)
	})}
	if g.req.poll() {
		g.req = nil
	}
}

// groupFetch reads t0-0's committed offset and checks it.
func (w *realWorld) groupFetch(node int32, c *group.Coordinator, where string) {
	g := w.grp
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 7, realGroupID
	t := kmsg.NewOffsetFetchRequestTopic()
	t.Topic, t.Partitions = "t0", []int32{0}
	req.Topics = append(req.Topics, t)
	r := c.OffsetFetch(req)
	g.req = &coordReq{node: node, poll: poll(txn.Result[*kmsg.OffsetFetchResponse]{Resp: r.Resp, Wait: r.Wait, Poll: r.Poll}, func(resp *kmsg.OffsetFetchResponse) {
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
			g.retryAt = w.clk.Now().Add(realTxnRetry)
			return
		}
		off := resp.Topics[0].Partitions[0].Offset
		if off < g.acked {
			w.fail("%sOffsetFetch from coordinator %d returned %d for t0-0, below the acknowledged commit %d", where, node, off, g.acked)
		}
		if off < g.fetched {
			w.fail("%sOffsetFetch from coordinator %d returned %d for t0-0, below an earlier fetch's %d", where, node, off, g.fetched)
		}
		g.fetched = max(g.fetched, off)
		if where != "" {
			g.settled = true
		}
		w.tracef("%sgroup fetch from coordinator %d: t0-0 at %d", where, node, off)
	})}
	if g.req.poll() {
		g.req = nil
	}
}

// crashGroup loses the request to a crashed broker's coordinator.
func (w *realWorld) crashGroup(id int32) {
	if r := w.grp.req; r != nil && r.node == id {
		w.grp.req = nil
	}
	delete(w.grp.coords, id)
}

// checkGroupSettled reads the committed offset once more after settling.
func (w *realWorld) checkGroupSettled() {
	for i := 0; i < 20 && w.failed == ""; i++ {
		w.groupStep(false)
		if w.grp.settled {
			return
		}
		if node, c := w.groupCoordinator(); c != nil && w.grp.req == nil {
			before := w.grp.retryAt
			w.grp.retryAt = time.Time{}
			w.groupFetch(node, c, "after settling, ")
			if w.grp.settled {
				return
			}
			if w.grp.req == nil {
				w.grp.retryAt = before
			}
		}
		w.clk.Advance(5 * time.Millisecond)
	}
}
