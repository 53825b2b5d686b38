package handler

// Fetch from the remote log (tiered storage, KIP-405;
// docs/tiered-storage.md, "Reads"). A consumer's fetch offset between a
// partition's log start and its local log start is read from the remote
// log, as Kafka's ReplicaManager does with a DelayedRemoteFetch: the
// partitions the local log answers are read first, the remote ones share
// what they left of the response's byte budget, and the remote reads
// run on the broker's pool (remote.log.reader.threads, at most
// remote.log.reader.max.pending.tasks queued: Kafka's RemoteLogReader)
// while the response waits, up to remote.fetch.max.wait.ms, in
// Reply.Await (the connection's reader and the partitions' owners never
// wait on the object store). A read not done by then answers its
// partition with no records and no error (DelayedRemoteFetch.onComplete
// sends the local read's empty result), so the consumer fetches again; a
// read that failed answers UNKNOWN_SERVER_ERROR (Kafka maps a
// RemoteStorageException, and a full queue's RejectedExecutionException,
// through Errors.forException), and an offset no remote segment holds
// OFFSET_OUT_OF_RANGE. The other partitions of the request answer as
// usual. While the broker's remote reads are over
// remote.log.manager.fetch.max.bytes.per.second (KIP-956,
// Broker.RemoteFetchThrottled) a partition to read remotely is answered
// with no records and no error, without a read, as Kafka's ReplicaManager
// does when RemoteLogManager.getFetchThrottleTimeMs is positive.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/storage"
)

// remoteFetch is one partition of a fetch to read from the remote log.
type remoteFetch struct {
	i             int // index in fetchRead.parts
	p             *broker.Partition
	offset        int64
	maxOffset     int64 // HW or LSO: nothing at or past it
	limit         int64 // bytes it may return
	first         bool  // the first batch is returned whole (KIP-74)
	readCommitted bool
}

// remoteResult is what one remote read gave.
type remoteResult struct {
	k       int
	data    []byte
	aborted []storage.AbortedTxn
	err     error
}

// remoteWait is remote.fetch.max.wait.ms.
func (h *Handlers) remoteWait() time.Duration {
	return time.Duration(h.b.Config().Int("remote.fetch.max.wait.ms", 500)) * time.Millisecond
}

// readRemote runs rd's remote reads on the broker's pool and fills their
// partitions, waiting at most remote.fetch.max.wait.ms (or until the
// connection goes).
func (h *Handlers) readRemote(r *protocol.Request, rd *fetchRead) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan remoteResult, len(rd.remote))
	pending := 0
	for k, rf := range rd.remote {
		if h.b.RemoteFetchThrottled(rf.p.Topic) {
			continue // KIP-956: no remote data this time, no error
		}
		err := h.b.SubmitRemoteRead(func(bctx context.Context) {
			res := remoteResult{k: k}
			if ctx.Err() != nil {
				// Expired before it ran: Kafka cancels the task.
				res.err = ctx.Err()
			} else {
				stop := context.AfterFunc(bctx, cancel)
				res.data, res.aborted, res.err = readRemotePartition(ctx, h.b.RemoteReader(), rf)
				stop()
				h.b.RemoteReadDone(rf.p.Topic, len(res.data), res.err)
			}
			out <- res
		})
		if err != nil {
			h.b.RemoteReadDone(rf.p.Topic, 0, err)
			out <- remoteResult{k: k, err: err}
		}
		pending++
	}
	timer := clock.After(h.b.Clock(), h.remoteWait())
	for ; pending > 0; pending-- {
		select {
		case res := <-out:
			h.fillRemote(rd, rd.remote[res.k], res)
		case <-timer:
			return
		case <-r.Conn.Gone():
			return
		}
	}
}

// readRemotePartition reads rf from the remote log, with the aborted
// transactions a read_committed read needs: those of the remote
// transaction indexes, then the local log's where the remote search did
// not reach the read's end (Kafka's
// RemoteLogManager.collectAbortedTransactions).
func readRemotePartition(ctx context.Context, rr *remote.Reader, rf remoteFetch) ([]byte, []storage.AbortedTxn, error) {
	if err := rf.p.RemoteReadable(); err != nil {
		return nil, nil, err
	}
	log := rf.p.Log()
	part := rf.p.RemotePartition()
	lineage := log.EpochEntries()
	res, err := rr.Read(ctx, part, lineage, rf.offset, int(rf.limit), rf.maxOffset, rf.first)
	if errors.Is(err, remote.ErrNoSegment) && rf.offset >= log.LogStartOffset() && rf.offset < log.LocalLogStartOffset() {
		// The log holds the offset, but the remote log metadata read so
		// far does not (a new leader of its __remote_log_metadata
		// partition whose HW has not caught up yet): retriable.
		return nil, nil, broker.ErrRemoteMetadataNotRead
	}
	if err != nil || !rf.readCommitted || len(res.Records) == 0 {
		return res.Records, nil, err
	}
	aborted, complete, err := rr.AbortedTxns(ctx, part, lineage, rf.offset, res.NextOffset, log.LocalLogStartOffset())
	if err != nil {
		return nil, nil, err
	}
	if !complete {
		aborted = append(aborted, log.AbortedTxns(rf.offset, res.NextOffset)...)
	}
	return res.Records, aborted, nil
}

// fillRemote puts one remote read's answer in its partition.
func (h *Handlers) fillRemote(rd *fetchRead, rf remoteFetch, res remoteResult) {
	sp := &rd.parts[rf.i]
	switch {
	case errors.Is(res.err, remote.ErrNoSegment):
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
	case errors.Is(res.err, broker.ErrRemoteMetadataNotRead):
		// Retriable: the broker reads the metadata on its remote log
		// manager's next pass.
		sp.ErrorCode = kerr.ReplicaNotAvailable.Code
	case res.err != nil:
		h.b.Logger().Warn("remote log read failed", "topic", rf.p.Topic, "partition", rf.p.TP.Partition, "offset", rf.offset, "err", res.err)
		sp.ErrorCode = kerr.UnknownServerError.Code
	default:
		sp.RecordBatches = res.data
		rd.bytes += int64(len(res.data))
		if rf.readCommitted && len(res.data) > 0 {
			sp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			for _, a := range res.aborted {
				at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
				at.ProducerID, at.FirstOffset = a.ProducerID, a.FirstOffset
				sp.AbortedTransactions = append(sp.AbortedTransactions, at)
			}
		}
	}
	rd.results[rf.i].Error = sp.ErrorCode
	rd.results[rf.i].Records = len(sp.RecordBatches) > 0
}
