package sharecoord

// The client side of the share coordinator, Kafka's DefaultStatePersister:
// the share partitions call the Persister, which finds the share
// coordinator of each key (the leader of its __share_group_state
// partition, from this node's metadata), calls the local coordinator when
// that is this node and otherwise sends the RPC (83..87) over the broker's
// inter-broker peer clients, the ones the transaction coordinator sends
// WriteTxnMarkers with. NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE and unreachable brokers are retried with a
// doubling backoff until the context ends (DefaultTimeout without a
// deadline); any other error (FENCED_STATE_EPOCH, FENCED_LEADER_EPOCH, ...)
// is returned as its kerr value.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/share"
)

// DefaultTimeout bounds a Persister call whose context has no deadline
// (Kafka's share coordinator RPCs use request.timeout.ms, 30 s).
const DefaultTimeout = 30 * time.Second

// persisterClientID is the client id of the persister's requests.
const persisterClientID = "sluice-share-persister"

// Sender sends one share state RPC to a broker. Production uses the
// broker's peer clients.
type Sender func(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error)

// Persister is the share.Persister the broker's share partitions use: it
// reaches the share coordinator of each key, on this node or another.
type Persister struct {
	local   *Coordinator
	self    int32
	send    Sender
	backoff time.Duration
}

var _ share.Persister = (*Persister)(nil)

// NewPersister returns the Persister of broker b, whose own share
// coordinator is local.
func NewPersister(b *broker.Broker, local *Coordinator) *Persister {
	return &Persister{local: local, self: b.NodeID(), backoff: 50 * time.Millisecond,
		send: func(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
			cl, err := b.Peer(node, persisterClientID)
			if err != nil {
				return nil, err
			}
			return cl.Request(ctx, req)
		}}
}

// NewPersisterWith returns a Persister on node self that calls local for
// the keys self coordinates and send for the others (tests pass a self
// that coordinates nothing to take the RPC path).
func NewPersisterWith(local *Coordinator, self int32, send Sender) *Persister {
	return &Persister{local: local, self: self, send: send, backoff: 50 * time.Millisecond}
}

// retriable reports whether err may go away by asking again, perhaps
// another node.
func retriable(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	switch ke {
	case kerr.NotCoordinator, kerr.CoordinatorLoadInProgress, kerr.CoordinatorNotAvailable,
		kerr.BrokerNotAvailable, kerr.RequestTimedOut:
		return true
	}
	return false
}

// call runs op against key's coordinator (local, or remote through
// remote) until it succeeds, fails for good, or ctx ends.
func (p *Persister) call(ctx context.Context, key share.Key, local func(ctx context.Context) error,
	remote func(ctx context.Context, node int32) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	backoff := p.backoff
	for {
		node, kerr := p.local.Coordinator(CoordinatorKey(key))
		var err error
		switch {
		case kerr != nil:
			err = kerr
		case node == p.self:
			err = local(ctx)
		default:
			err = remote(ctx, node)
		}
		if err == nil || !retriable(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(backoff*2, time.Second)
	}
}

// respErr is the error of a response partition's code.
func respErr(code int16) error {
	if code == 0 {
		return nil
	}
	return kerr.ErrorForCode(code)
}

// Initialize implements share.Persister.
func (p *Persister) Initialize(ctx context.Context, key share.Key, stateEpoch int32, startOffset int64) error {
	return p.call(ctx, key, func(ctx context.Context) error {
		return p.local.Initialize(ctx, key, stateEpoch, startOffset)
	}, func(ctx context.Context, node int32) error {
		req := kmsg.NewPtrInitializeShareGroupStateRequest()
		req.GroupID = key.Group
		t := kmsg.NewInitializeShareGroupStateRequestTopic()
		t.TopicID = key.TopicID
		pp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		pp.Partition, pp.StateEpoch, pp.StartOffset = key.Partition, stateEpoch, startOffset
		t.Partitions = append(t.Partitions, pp)
		req.Topics = append(req.Topics, t)
		resp, err := p.send(ctx, node, req)
		if err != nil {
			return err
		}
		r, ok := resp.(*kmsg.InitializeShareGroupStateResponse)
		if !ok || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return kerr.UnknownServerError
		}
		return respErr(r.Topics[0].Partitions[0].ErrorCode)
	})
}

// Read implements share.Persister.
func (p *Persister) Read(ctx context.Context, key share.Key, leaderEpoch int32) (share.State, error) {
	var out share.State
	err := p.call(ctx, key, func(ctx context.Context) error {
		var err error
		out, err = p.local.Read(ctx, key, leaderEpoch)
		return err
	}, func(ctx context.Context, node int32) error {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = key.Group
		t := kmsg.NewReadShareGroupStateRequestTopic()
		t.TopicID = key.TopicID
		pp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		pp.Partition, pp.LeaderEpoch = key.Partition, leaderEpoch
		t.Partitions = append(t.Partitions, pp)
		req.Topics = append(req.Topics, t)
		resp, err := p.send(ctx, node, req)
		if err != nil {
			return err
		}
		r, ok := resp.(*kmsg.ReadShareGroupStateResponse)
		if !ok || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return kerr.UnknownServerError
		}
		rp := r.Topics[0].Partitions[0]
		if err := respErr(rp.ErrorCode); err != nil {
			return err
		}
		out = share.State{StateEpoch: rp.StateEpoch, LeaderEpoch: leaderEpoch, StartOffset: rp.StartOffset, DeliveryCompleteCount: -1}
		if rp.StartOffset == -1 {
			out = Uninitialized
		}
		for _, b := range rp.StateBatches {
			out.Batches = append(out.Batches, share.StateBatch{FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
				DeliveryState: b.DeliveryState, DeliveryCount: b.DeliveryCount})
		}
		return nil
	})
	if err != nil {
		return share.State{}, err
	}
	return out, nil
}

// Write implements share.Persister.
func (p *Persister) Write(ctx context.Context, key share.Key, st share.State) error {
	return p.call(ctx, key, func(ctx context.Context) error {
		return p.local.Write(ctx, key, st)
	}, func(ctx context.Context, node int32) error {
		req := kmsg.NewPtrWriteShareGroupStateRequest()
		req.Version = 1
		req.GroupID = key.Group
		t := kmsg.NewWriteShareGroupStateRequestTopic()
		t.TopicID = key.TopicID
		pp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		pp.Partition, pp.StateEpoch, pp.LeaderEpoch, pp.StartOffset = key.Partition, st.StateEpoch, st.LeaderEpoch, st.StartOffset
		pp.DeliveryCompleteCount = st.DeliveryCompleteCount
		for _, b := range st.Batches {
			sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
			sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount
			pp.StateBatches = append(pp.StateBatches, sb)
		}
		t.Partitions = append(t.Partitions, pp)
		req.Topics = append(req.Topics, t)
		resp, err := p.send(ctx, node, req)
		if err != nil {
			return err
		}
		r, ok := resp.(*kmsg.WriteShareGroupStateResponse)
		if !ok || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return kerr.UnknownServerError
		}
		return respErr(r.Topics[0].Partitions[0].ErrorCode)
	})
}

// Delete implements share.Persister.
func (p *Persister) Delete(ctx context.Context, key share.Key) error {
	return p.call(ctx, key, func(ctx context.Context) error {
		return p.local.Delete(ctx, key)
	}, func(ctx context.Context, node int32) error {
		req := kmsg.NewPtrDeleteShareGroupStateRequest()
		req.GroupID = key.Group
		t := kmsg.NewDeleteShareGroupStateRequestTopic()
		t.TopicID = key.TopicID
		pp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
		pp.Partition = key.Partition
		t.Partitions = append(t.Partitions, pp)
		req.Topics = append(req.Topics, t)
		resp, err := p.send(ctx, node, req)
		if err != nil {
			return err
		}
		r, ok := resp.(*kmsg.DeleteShareGroupStateResponse)
		if !ok || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return kerr.UnknownServerError
		}
		return respErr(r.Topics[0].Partitions[0].ErrorCode)
	})
}

// ReadSummary implements share.Persister.
func (p *Persister) ReadSummary(ctx context.Context, key share.Key) (share.Summary, error) {
	var out share.Summary
	err := p.call(ctx, key, func(ctx context.Context) error {
		var err error
		out, err = p.local.ReadSummary(ctx, key)
		return err
	}, func(ctx context.Context, node int32) error {
		req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
		req.Version = 1
		req.GroupID = key.Group
		t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
		t.TopicID = key.TopicID
		pp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
		pp.Partition, pp.LeaderEpoch = key.Partition, -1
		t.Partitions = append(t.Partitions, pp)
		req.Topics = append(req.Topics, t)
		resp, err := p.send(ctx, node, req)
		if err != nil {
			return err
		}
		r, ok := resp.(*kmsg.ReadShareGroupStateSummaryResponse)
		if !ok || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
			return kerr.UnknownServerError
		}
		rp := r.Topics[0].Partitions[0]
		if err := respErr(rp.ErrorCode); err != nil {
			return err
		}
		out = share.Summary{StateEpoch: rp.StateEpoch, LeaderEpoch: rp.LeaderEpoch, StartOffset: rp.StartOffset,
			DeliveryCompleteCount: rp.DeliveryCompleteCount}
		return nil
	})
	if err != nil {
		return share.Summary{}, err
	}
	return out, nil
}
