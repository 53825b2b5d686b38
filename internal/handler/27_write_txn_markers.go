package handler

// WriteTxnMarkers, versions 0-2: a transaction coordinator asks the leader
// of each partition in a transaction to write its COMMIT or ABORT marker
// (KIP-98; Kafka's KafkaApis.handleWriteTxnMarkersRequest). Only brokers
// send it: it needs CLUSTER_ACTION on the cluster.
//
// Each marker is a control batch (batch.EncodeMarker) stamped with the
// coordinator epoch, appended through the partition's replica machine with
// acks=all, so a partition's answer means the marker is replicated and the
// transaction's records there are decided (the last stable offset moves
// past them once no older transaction is open). Errors per partition, as
// Kafka's: NOT_LEADER_OR_FOLLOWER (leads elsewhere),
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH (the marker's
// producer epoch is older than the partition's), TRANSACTION_COORDINATOR_FENCED
// (its coordinator epoch is older than the last marker's),
// NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT. A marker written to a partition
// of __consumer_offsets also completes the group coordinator's pending
// transactional offsets for that producer (TxnOffsetCommit).
//
// v2 carries each marker's transaction version. A version 2 transaction's
// markers have an epoch above its data's (the coordinator bumps it at
// every end, KIP-890 part 2), so a version 2 marker whose epoch is not
// above that of the transaction open in the partition belongs to an
// earlier transaction and arrived late (a request held in a paused
// broker while the coordinator's retry succeeded): INVALID_PRODUCER_EPOCH,
// nothing appended, instead of ending the producer's next transaction.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/replica"
)

// markerTimeout bounds the wait for a marker to replicate (Kafka uses
// the coordinator's request.timeout.ms, 30 s by default).
const markerTimeout = 30 * time.Second

// maxMarkerPartitions bounds the partitions of one WriteTxnMarkers request.
const maxMarkerPartitions = 100_000

// markerWrite is one partition's marker awaiting replication.
type markerWrite struct {
	p      *broker.Partition
	pid    int64
	commit bool
	result <-chan replica.ProduceResult
	slot   *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
}

func (h *Handlers) writeTxnMarkers(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	allowed := h.allowedCluster(r, acl.OpClusterAction)
	n := 0
	for _, m := range req.Markers {
		for _, t := range m.Topics {
			n += len(t.Partitions)
		}
	}
	deadline := h.b.Now().Add(markerTimeout)
	lookup := h.b.LookupDeadline()
	var writes []markerWrite
	type slotRef struct{ mi, ti, pi int }
	var refs []slotRef
	for mi, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		data := batch.EncodeMarker(m.ProducerID, m.ProducerEpoch, batch.Marker{Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}, h.b.Now().UnixMilli())
		for ti, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, part := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = part
				var err error
				var p *broker.Partition
				switch {
				case !allowed:
					err = kerr.ClusterAuthorizationFailed
				case n > maxMarkerPartitions:
					err = kerr.InvalidRequest
				case m.ProducerID < 0:
					err = kerr.InvalidProducerIDMapping
				case h.b.Image().Topics[t.Topic] == nil:
					err = kerr.UnknownTopicOrPartition
				default:
					p, err = h.b.LeaderBy(t.Topic, part, lookup)
				}
				if err != nil {
					rp.ErrorCode = code(err)
				} else {
					// Each partition gets its own copy: the append stamps
					// offsets and the epoch into the bytes.
					ch := p.WriteMarker(append([]byte(nil), data...), deadline, req.Version >= 2 && m.TransactionVersion >= 2)
					writes = append(writes, markerWrite{p: p, pid: m.ProducerID, commit: m.Committed, result: ch})
					refs = append(refs, slotRef{mi, ti, len(rt.Partitions)})
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	if len(writes) == 0 {
		return protocol.Reply{Resp: resp}
	}
	for i, ref := range refs {
		writes[i].slot = &resp.Markers[ref.mi].Topics[ref.ti].Partitions[ref.pi]
	}
	return protocol.Reply{Await: func() kmsg.Response {
		timer := h.b.Clock().NewTimer(clock.Until(h.b.Clock(), deadline) + time.Second)
		defer timer.Stop()
		for _, w := range writes {
			select {
			case res := <-w.result:
				w.slot.ErrorCode = res.Error
				if res.Error == 0 {
					h.markerWritten(w.p, w.pid, w.commit)
				}
			case <-timer.C():
				w.slot.ErrorCode = kerr.RequestTimedOut.Code
			}
		}
		return resp
	}}
}

// markerWritten runs after a marker is replicated: on a partition of
// __consumer_offsets it completes the producer's pending transactional
// offsets (Kafka's GroupCoordinator.onTransactionCompleted).
func (h *Handlers) markerWritten(p *broker.Partition, pid int64, commit bool) {
	for _, fn := range h.onMarker {
		fn(p.Topic, p.Partition, pid, commit)
	}
}
