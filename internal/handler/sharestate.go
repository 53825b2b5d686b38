package handler

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/sharecoord"
)

// shareStateAPI serves the share coordinator's inter-broker APIs (83..87)
// and the share-group offsets admin APIs (90..92) against one share
// coordinator and the Persister that reaches any share coordinator. The
// state logic lives in internal/sharecoord; these check authorization,
// validate, adapt kmsg requests and answer through Reply.Await.
type shareStateAPI struct {
	h *Handlers
	c *sharecoord.Coordinator
	p share.Persister
	// groupState reports whether a share group is empty and whether it
	// exists (DescribeShareGroupOffsets, AlterShareGroupOffsets,
	// DeleteShareGroupOffsets), or the coordinator error of a node that
	// is not the group's coordinator; the share group coordinator sets it
	// with SetShareGroupState.
	groupMu    sync.Mutex
	groupState func(group string) (empty, exists bool, err *kerr.Error)
}

// registerShareStateAPIs installs InitializeShareGroupState,
// ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState,
// ReadShareGroupStateSummary, DescribeShareGroupOffsets,
// AlterShareGroupOffsets and DeleteShareGroupOffsets, served by a share
// coordinator configured from the broker properties (c, if not nil);
// FindCoordinator's share keys use the same coordinator.
func (h *Handlers) registerShareStateAPIs(reg *protocol.Registry, c *sharecoord.Coordinator) {
	if c == nil {
		c = sharecoord.New(h.b, sharecoord.Options{Config: sharecoord.ConfigFrom(h.b.Config())})
	}
	s := &shareStateAPI{h: h, c: c, p: sharecoord.NewPersister(h.b, c)}
	s.groupState = func(string) (bool, bool, *kerr.Error) { return true, true, nil }
	h.shareState = s
	// Coordinate the share partitions of the __share_group_state
	// partitions this node leads; the leader epoch orders the changes.
	h.b.OnLeadershipChange(func(tp broker.TP, isLeader bool, epoch int32) {
		if tp.Topic != sharecoord.Topic {
			return
		}
		if isLeader {
			c.ElectAt(tp.Partition, epoch)
		} else {
			c.ResignAt(tp.Partition, epoch)
		}
	})
	for _, api := range []protocol.Handler{
		{Key: 83, MinVersion: 0, MaxVersion: 0, Serve: s.initializeShareGroupState},
		{Key: 84, MinVersion: 0, MaxVersion: 0, Serve: s.readShareGroupState},
		{Key: 85, MinVersion: 0, MaxVersion: 1, Serve: s.writeShareGroupState},
		{Key: 86, MinVersion: 0, MaxVersion: 0, Serve: s.deleteShareGroupState},
		{Key: 87, MinVersion: 0, MaxVersion: 1, Serve: s.readShareGroupStateSummary},
		{Key: 90, MinVersion: 0, MaxVersion: 1, Serve: s.describeShareGroupOffsets},
		{Key: 91, MinVersion: 0, MaxVersion: 0, Serve: s.alterShareGroupOffsets},
		{Key: 92, MinVersion: 0, MaxVersion: 0, Serve: s.deleteShareGroupOffsets},
	} {
		reg.Register(api)
	}
}

// ShareCoordinator returns the share coordinator.
func (h *Handlers) ShareCoordinator() *sharecoord.Coordinator { return h.shareState.c }

// SharePersister returns the Persister the share partitions use: it
// reaches the share coordinator of each key, here or on another broker.
func (h *Handlers) SharePersister() share.Persister { return h.shareState.p }

// SetShareGroupState sets how DescribeShareGroupOffsets,
// AlterShareGroupOffsets and DeleteShareGroupOffsets learn whether a
// share group is empty and exists, or that this node is not its
// coordinator (the share group coordinator's); by default every group is
// empty and coordinated here.
func (h *Handlers) SetShareGroupState(fn func(group string) (empty, exists bool, err *kerr.Error)) {
	h.shareState.groupMu.Lock()
	h.shareState.groupState = fn
	h.shareState.groupMu.Unlock()
}

func (s *shareStateAPI) group(g string) (empty, exists bool, err *kerr.Error) {
	s.groupMu.Lock()
	fn := s.groupState
	s.groupMu.Unlock()
	return fn(g)
}

// shareStateTimeout bounds one share state RPC's work (request.timeout.ms).
const shareStateTimeout = sharecoord.DefaultTimeout

// maxShareStatePartitions bounds the partitions of one share state
// request.
const maxShareStatePartitions = 10000

// eachPartition runs fn for every index below n, at most 16 at once, and
// returns when all are done.
func eachPartition(n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// stateCtx is the context of one share state request's work.
func stateCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), shareStateTimeout)
}

// stateKeyError validates a share state request's group and partition
// (Kafka's ShareCoordinatorService answers INVALID_REQUEST for an empty
// group id, a zero topic id or a negative partition).
func stateKeyError(key share.Key) *kerr.Error {
	if key.Group == "" || key.TopicID == ([16]byte{}) || key.Partition < 0 {
		return kerr.InvalidRequest
	}
	return nil
}
