package handler

// Share fetches below the local log start of a tiered topic (KIP-405 with
// KIP-932). A share partition whose next offset is in the remote log (its
// share.auto.offset.reset=earliest start, or records released there) is
// read from the remote log as a consumer fetch is (fetch_remote.go): on
// the broker's remote reader pool, waiting at most
// remote.fetch.max.wait.ms, within
// remote.log.manager.fetch.max.bytes.per.second, with the aborted
// transactions of the remote transaction indexes for read_committed.
// Kafka's DelayedShareFetch does the same through
// ReplicaManager.readFromLog's remote path.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/storage"
)

// readShareRemote reads p's remote log from offset, below maxOffset (the
// HW, or the LSO under read_committed), at most maxBytes (the first batch
// whole). A read throttled by the fetch quota, not done within
// remote.fetch.max.wait.ms, or of an offset no remote segment holds (the
// log start moved) returns nothing without an error: the share fetch
// tries again. A failed read is UNKNOWN_SERVER_ERROR, a full queue too
// (Kafka's mapping of RemoteStorageException and
// RejectedExecutionException).
func (h *Handlers) readShareRemote(p *broker.Partition, offset, maxOffset, maxBytes int64, readCommitted bool) ([]byte, []storage.AbortedTxn, int16) {
	if h.b.RemoteFetchThrottled(p.Topic) {
		return nil, nil, 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		data    []byte
		aborted []storage.AbortedTxn
		err     error
	}
	out := make(chan result, 1)
	rf := remoteFetch{p: p, offset: offset, maxOffset: maxOffset, limit: max(maxBytes, 0), first: true, readCommitted: readCommitted}
	err := h.b.SubmitRemoteRead(func(bctx context.Context) {
		var res result
		if ctx.Err() != nil {
			res.err = ctx.Err()
		} else {
			stop := context.AfterFunc(bctx, cancel)
			res.data, res.aborted, res.err = readRemotePartition(ctx, h.b.RemoteReader(), rf)
			stop()
			h.b.RemoteReadDone(p.Topic, len(res.data), res.err)
		}
		out <- res
	})
	if err != nil {
		h.b.RemoteReadDone(p.Topic, 0, err)
		h.b.Logger().Warn("remote log read for a share fetch failed", "topic", p.Topic, "partition", p.TP.Partition, "offset", offset, "err", err)
		return nil, nil, kerr.UnknownServerError.Code
	}
	select {
	case res := <-out:
		switch {
		case errors.Is(res.err, remote.ErrNoSegment), errors.Is(res.err, broker.ErrRemoteMetadataNotRead):
			// Nothing to deliver this time: the share fetch comes again.
			return nil, nil, 0
		case res.err != nil:
			h.b.Logger().Warn("remote log read for a share fetch failed", "topic", p.Topic, "partition", p.TP.Partition, "offset", offset, "err", res.err)
			return nil, nil, kerr.UnknownServerError.Code
		}
		return res.data, res.aborted, 0
	case <-clock.After(h.b.Clock(), h.remoteWait()):
		return nil, nil, 0
	}
}
