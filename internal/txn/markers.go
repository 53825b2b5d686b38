package txn

// The second phase of a transaction (Kafka's TransactionMarkerChannelManager):
// once PrepareCommit or PrepareAbort is durable, a WriteTxnMarkers request
// (v1) goes to the leader of every partition of the transaction, this node
// included. Partitions that fail with a retriable error, or whose leader
// is unknown or unreachable, are retried with a doubling backoff (up to a
// second), against the leaders of the current metadata image. A partition
// whose topic is gone from the image is done (Kafka removes it from the
// transaction). When every partition has its marker, CompleteCommit or
// CompleteAbort is written. A coordinator that loads a prepared
// transaction does the same (roll forward). A marker answered with
// INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED means this
// coordinator is stale: sending stops and the transaction is left to the
// newer one.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/metadata"
)

// MarkerSender sends a WriteTxnMarkers request to a broker. Tests use a
// fake; production uses BrokerMarkers.
type MarkerSender interface {
	// Send sends req to node and returns its response, or an error if
	// the node could not be reached or did not answer.
	Send(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error)
}

// BrokerMarkers sends markers through the broker's inter-broker peer
// clients (broker.Broker.Peer).
type BrokerMarkers struct{ B *broker.Broker }

// markerClientID is the client id of the coordinator's marker requests.
const markerClientID = "sluice-txn-coordinator"

// Send implements MarkerSender.
func (bm BrokerMarkers) Send(ctx context.Context, node int32, req *kmsg.WriteTxnMarkersRequest) (*kmsg.WriteTxnMarkersResponse, error) {
	cl, err := bm.B.Peer(node, markerClientID)
	if err != nil {
		return nil, err
	}
	req.Version = 1
	resp, err := cl.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	r, ok := resp.(*kmsg.WriteTxnMarkersResponse)
	if !ok {
		return nil, kerr.UnknownServerError
	}
	return r, nil
}

// markerTimeout bounds one WriteTxnMarkers exchange (request.timeout.ms).
const markerTimeout = 30 * time.Second

// startMarkers sends the markers of m's prepared transaction in the
// background and then writes its completion on s's owner (owner).
func (c *Coordinator) startMarkers(s *shard, m *Metadata) {
	commit := m.State == PrepareCommit
	pid, epoch := m.ProducerID, m.Epoch
	tv := m.TxnVersion
	parts := SortedPartitions(m.Partitions)
	coordEpoch := s.Epoch()
	if c.stepped {
		c.addMarkerJob(s, m, commit, pid, epoch, coordEpoch, tv, parts)
		return
	}
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		if !c.sendMarkers(s, commit, pid, epoch, coordEpoch, tv, parts) {
			return
		}
		s.Post(func(s *shard) { c.complete(s, m, pid, epoch) })
	}()
}

// complete writes the completion of m's prepared transaction (owner),
// unless m changed meanwhile.
func (c *Coordinator) complete(s *shard, m *Metadata, pid int64, epoch int16) {
	if s.Gone() || s.State().txns[m.ID] != m || m.ProducerID != pid || m.Epoch != epoch ||
		(m.State != PrepareCommit && m.State != PrepareAbort) {
		return
	}
	t, err := m.PrepareComplete(c.clock.Now())
	if err != nil {
		c.log.Error("completing transaction", "id", m.ID, "state", m.State, "err", err)
		return
	}
	c.write(s, m, t, func(err *kerr.Error) {
		if err == nil || s.Gone() {
			return
		}
		// Retry the completion after a backoff (Kafka retries the
		// append of the complete record until it is no longer the
		// coordinator).
		if c.stepped {
			s.Schedule("complete/"+m.ID, s.Now().Add(c.cfg.MarkerBackoff), func(s *shard) { c.complete(s, m, pid, epoch) })
			return
		}
		c.work.Add(1)
		go func() {
			defer c.work.Done()
			if !c.sleep(s, c.cfg.MarkerBackoff) {
				return
			}
			s.Post(func(s *shard) { c.complete(s, m, pid, epoch) })
		}()
	})
}

// sleep waits d, false if s is resigned first.
func (c *Coordinator) sleep(s *shard, d time.Duration) bool {
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-s.Stopped():
		return false
	}
}

// sendMarkers writes the marker to every partition, retrying until each
// is done. It returns false when s was resigned or the markers were
// fenced.
func (c *Coordinator) sendMarkers(s *shard, commit bool, pid int64, epoch int16, coordEpoch int32, tv int16, parts []Partition) bool {
	pending := make(map[Partition]struct{}, len(parts))
	for _, p := range parts {
		pending[p] = struct{}{}
	}
	backoff := c.cfg.MarkerBackoff
	for len(pending) > 0 {
		select {
		case <-s.Stopped():
			return false
		default:
		}
		byNode := markerTargets(c.b.Image(), pending)
		type answer struct {
			parts   []Partition
			codes   map[Partition]int16
			failure error
		}
		answers := make(chan answer, len(byNode))
		for node, ps := range byNode {
			go func() {
				codes, err := c.sendTo(s, node, commit, pid, epoch, coordEpoch, tv, ps)
				answers <- answer{ps, codes, err}
			}()
		}
		fenced := false
		for range byNode {
			a := <-answers
			if a.failure != nil {
				c.log.Debug("sending transaction markers", "producer.id", pid, "err", a.failure)
				continue
			}
			if c.markerCodes(pending, a.parts, a.codes, commit, pid) {
				fenced = true
			}
		}
		if fenced {
			c.log.Warn("transaction markers fenced: a newer coordinator or producer epoch exists", "producer.id", pid, "epoch", epoch)
			return false
		}
		if len(pending) == 0 {
			break
		}
		if !c.sleep(s, backoff) {
			return false
		}
		backoff = min(2*backoff, time.Second)
	}
	return true
}

// markerTargets groups the partitions still pending by their leader in
// img; a partition whose topic is gone is done (removed from pending), one
// without a leader waits for the next round.
func markerTargets(img *metadata.Image, pending map[Partition]struct{}) map[int32][]Partition {
	byNode := map[int32][]Partition{}
	for p := range pending {
		t := img.Topics[p.Topic]
		switch {
		case t == nil || int(p.Partition) >= len(t.Partitions):
			delete(pending, p) // the topic was deleted
		case t.Partitions[p.Partition].Leader >= 0:
			n := t.Partitions[p.Partition].Leader
			byNode[n] = append(byNode[n], p)
		}
	}
	return byNode
}

// markerCodes applies one broker's answer for parts: a partition that
// took its marker (or whose topic is gone) is done; it reports whether a
// partition fenced the markers (a newer coordinator or producer epoch).
func (c *Coordinator) markerCodes(pending map[Partition]struct{}, parts []Partition, codes map[Partition]int16, commit bool, pid int64) (fenced bool) {
	for _, p := range parts {
		code, ok := codes[p]
		if !ok {
			continue
		}
		switch code {
		case 0:
			delete(pending, p)
		case kerr.UnknownTopicOrPartition.Code:
			if img := c.b.Image(); img.Topics[p.Topic] == nil {
				delete(pending, p)
			}
		case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
			fenced = true
		case kerr.ClusterAuthorizationFailed.Code:
			// Retried like any failure, but it will not pass until an
			// operator acts: say so (the logger is rate-limited).
			c.log.Warn("transaction marker refused: the inter-broker principal needs CLUSTER_ACTION on the cluster (make it a super user, docs/security.md); the transaction stays in "+map[bool]string{true: "PrepareCommit", false: "PrepareAbort"}[commit],
				"topic", p.Topic, "partition", p.Partition, "producer.id", pid)
		default:
			c.log.Debug("transaction marker not written", "topic", p.Topic, "partition", p.Partition,
				"producer.id", pid, "err", kerr.ErrorForCode(code))
		}
	}
	return fenced
}

// sendTo sends the marker for ps to node (batched with other
// transactions' markers for it) and returns the error code of each
// partition.
func (c *Coordinator) sendTo(s *shard, node int32, commit bool, pid int64, epoch int16, coordEpoch int32, tv int16, ps []Partition) (map[Partition]int16, error) {
	mk := newMarker(commit, pid, epoch, coordEpoch, tv, ps)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.Stopped():
			cancel()
		case <-ctx.Done():
		}
	}()
	out := c.queues.send(ctx, node, mk)
	return out.codes, out.err
}

// newMarker is the WriteTxnMarkers marker of a transaction for the
// partitions ps, sorted by topic and partition.
func newMarker(commit bool, pid int64, epoch int16, coordEpoch int32, tv int16, ps []Partition) kmsg.WriteTxnMarkersRequestMarker {
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = pid, epoch, commit, coordEpoch
	mk.TransactionVersion = int8(tv) // v2: the partition then refuses a late marker (27_write_txn_markers.go)
	sorted := make(map[Partition]struct{}, len(ps))
	for _, p := range ps {
		sorted[p] = struct{}{}
	}
	for _, p := range SortedPartitions(sorted) {
		if n := len(mk.Topics); n > 0 && mk.Topics[n-1].Topic == p.Topic {
			mk.Topics[n-1].Partitions = append(mk.Topics[n-1].Partitions, p.Partition)
			continue
		}
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = p.Topic, []int32{p.Partition}
		mk.Topics = append(mk.Topics, t)
	}
	return mk
}
