// Package replica is the pure replication state machine of one partition on
// one broker: LEO, HW, ISR tracking, leader epochs and divergence detection,
// following docs/kafka-replication.md §1–§3 and §7. It has no
// goroutines, no clock and no I/O: events go in, actions come out, in the
// style of etcd raft's `Node.Ready`.
//
// # Events
//
//   - ApplyMetadata: the controller's partition state (becomes leader or
//     follower, ISR and epoch changes).
//   - Append: a produce request (leader).
//   - HandleFetch: a follower's or consumer's fetch (leader); returns the
//     response to send at once.
//   - FetchRequest / HandleFetchResponse: the follower's side of fetching.
//   - Flushed: the driver's fsync reached an offset.
//   - Tick: the clock moved (ISR shrink, produce timeouts).
//   - ISRChangeResult: the controller answered an ISR proposal.
//   - DeleteRecords / AdvanceLogStart: the log start moves (a client's
//     DeleteRecords, answered in Ready.Deleted once every live replica
//     followed; retention).
//
// # Actions
//
// After any events, the driver calls Ready, executes it in order
// (truncate, persist the epochs, append, persist the log start, reply,
// propose) and calls Advance:
//
//	for {
//		// feed events ...
//		if r.HasReady() {
//			rd := r.Ready()
//			log.Truncate(rd.Truncate); log.SetEpochs(rd.Epochs)
//			log.Append(rd.Append...) // each ABORT marker with its Abort entry
//			persist(rd.LogStart, rd.HW); reply(rd.Completed); send(rd.ISRProposal)
//			r.Advance()
//		}
//		if req, ok := r.FetchRequest(); ok && !inflight { send(req) }
//	}
//
// The machine keeps its own mirror of the log's LEO, flushed offset, log
// start and HW, so it can assign offsets synchronously. It is the one
// owner of the partition's leader-epoch cache and idempotent-producer
// state (sequence checks, open transactions, the aborted-transaction
// entries of its ABORT markers, Batch.Abort): the driver's log persists
// them as Ready says (storage.Log.HandOver; the log snapshots producer
// state at each segment roll from a copy it keeps in step with its
// appends), and after a truncation the driver hands back the producer
// state the disk holds (ResetProducers).
//
// # Durability (docs/architecture.md, "Durability")
//
// A replica's LEO counts toward the HW only up to what it has flushed. The
// leader uses its flushed offset; a follower's fetch names how many offsets
// below its fetch offset are not flushed yet (FetchRequest.Unflushed), and
// the leader records the rest, its flushed offset, as its acknowledgement.
// A follower whose last answer brought records fetches again before they
// are flushed (pipelined). An acks=all acknowledgement therefore means the
// records are fsynced on every member of the maximal ISR, which has at least
// min.insync.replicas members (strict min ISR, docs/kafka-replication.md §1.4).
package replica
