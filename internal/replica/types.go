package replica

import (
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
)

// Kafka error codes used by the state machine. They are the numeric values of
// github.com/twmb/franz-go/pkg/kerr (codes_test.go checks that they match),
// kept as constants so callers can switch on them.
const (
	ErrNone                         int16 = 0   // NONE
	ErrOffsetOutOfRange             int16 = 1   // OFFSET_OUT_OF_RANGE
	ErrNotLeaderOrFollower          int16 = 6   // NOT_LEADER_OR_FOLLOWER
	ErrRequestTimedOut              int16 = 7   // REQUEST_TIMED_OUT
	ErrKafkaStorageError            int16 = 56  // KAFKA_STORAGE_ERROR
	ErrNotEnoughReplicas            int16 = 19  // NOT_ENOUGH_REPLICAS
	ErrNotEnoughReplicasAfterAppend int16 = 20  // NOT_ENOUGH_REPLICAS_AFTER_APPEND
	ErrNotController                int16 = 41  // NOT_CONTROLLER
	ErrInvalidRequest               int16 = 42  // INVALID_REQUEST
	ErrOutOfOrderSequence           int16 = 45  // OUT_OF_ORDER_SEQUENCE_NUMBER
	ErrInvalidProducerEpoch         int16 = 47  // INVALID_PRODUCER_EPOCH
	ErrInvalidTxnState              int16 = 48  // INVALID_TXN_STATE
	ErrTransactionCoordinatorFenced int16 = 52  // TRANSACTION_COORDINATOR_FENCED
	ErrOperationNotAttempted        int16 = 55  // OPERATION_NOT_ATTEMPTED
	ErrFencedLeaderEpoch            int16 = 74  // FENCED_LEADER_EPOCH
	ErrUnknownLeaderEpoch           int16 = 75  // UNKNOWN_LEADER_EPOCH
	ErrInvalidUpdateVersion         int16 = 95  // INVALID_UPDATE_VERSION
	ErrIneligibleReplica            int16 = 107 // INELIGIBLE_REPLICA
	ErrNewLeaderElected             int16 = 108 // NEW_LEADER_ELECTED
	// ErrOffsetMovedToTieredStorage is OFFSET_MOVED_TO_TIERED_STORAGE
	// (KIP-405): a follower's fetch offset is below the leader's local
	// log start, in its remote log (HandleRemoteAux).
	ErrOffsetMovedToTieredStorage int16 = 109
)

// Acks values of a produce request.
const (
	AcksNone   int16 = 0  // no response is sent (the driver drops the result)
	AcksLeader int16 = 1  // acknowledged once the local log is durable past the batch
	AcksAll    int16 = -1 // acknowledged once the HW covers the batch (docs/kafka-replication.md §2.5)
	// AcksAppended answers at once with the batch's offsets, durable or
	// not: for the broker's own writes that wait for durability their own
	// way (the group coordinator's). Never a client's acks value.
	AcksAppended int16 = 2
)

// NoProducer is the producer id of a non-idempotent batch.
const NoProducer int64 = -1

// Role is the replica's role for its partition.
type Role int8

// Roles.
const (
	RoleNone     Role = iota // no metadata applied yet: serves nothing
	RoleLeader               // leader for the current leader epoch
	RoleFollower             // follower (possibly of no leader: Leader == -1)
)

func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return "none"
}

// Config configures one partition replica.
type Config struct {
	// ID is this broker's id.
	ID int32
	// BrokerEpoch is this broker incarnation's epoch (KIP-903), sent in
	// follower fetches. -1 if unknown.
	BrokerEpoch int64
	// Partition labels the partition in traces (e.g. "orders-3").
	Partition string
	// MinISR is the topic's min.insync.replicas. The effective minimum is
	// min(MinISR, replication factor) (docs/kafka-replication.md §1.3). Zero
	// means 1.
	MinISR int
	// LagTimeMaxMs is replica.lag.time.max.ms (docs/kafka-replication.md §2.1):
	// a follower that has not been caught up for longer leaves the ISR. Zero
	// means 30000.
	LagTimeMaxMs int64
	// ProducerIDExpirationMs is producer.id.expiration.ms: an idempotent
	// producer whose last batch's max timestamp is older than this is
	// forgotten, on leaders and followers alike (Kafka's
	// ProducerStateManager.removeExpiredProducers); its next batch is
	// then checked as a new producer's. Zero means 86400000.
	ProducerIDExpirationMs int64
	// ProducerIDExpirationCheckMs is
	// producer.id.expiration.check.interval.ms: how often Tick looks for
	// expired producers. Zero means 600000.
	ProducerIDExpirationCheckMs int64
	// DropQueuedProposal puts a fixed bug back, for the simulator's tests
	// only (broker.Knobs.DropQueuedISR): a proposal made while another is
	// with the controller is dropped instead of sent after it.
	DropQueuedProposal bool
	// StableUnreplicatedTxns drops the rule that holds the last stable
	// offset below a transaction whose marker is not yet below the HW
	// (LastStable; Kafka's unreplicated transactions), for the
	// simulator's tests only (broker.Knobs.StableUnreplicatedTxns).
	StableUnreplicatedTxns bool
	// AcceptLateMarkers puts back the missing check of a late
	// transaction version 2 marker (Batch.BumpedEpoch), for the
	// simulator's tests only (broker.Knobs.AcceptLateMarkers).
	AcceptLateMarkers bool
	// AnswerDeleteRecordsEarly puts back answering DeleteRecords once the
	// leader's own log start moved, before the followers raised theirs,
	// for the simulator's tests only (broker.Knobs.AnswerDeleteRecordsEarly).
	AnswerDeleteRecordsEarly bool
}

// LogState is the recovered state of the local log that New starts from.
// Everything in it is durable: after recovery the flushed offset is LEO.
type LogState struct {
	LogStart int64 // first readable offset
	LEO      int64 // log end offset (next offset to be written)
	HW       int64 // checkpointed high watermark; clamped to [LogStart, LEO]
	// Epochs is the leader-epoch cache; New takes ownership. nil means empty.
	Epochs *epoch.Cache
	// Producers is the idempotent-producer state at LEO; New takes
	// ownership. nil means empty.
	Producers *producer.State
	// Completed are the transactions whose marker is at or above HW, in
	// log order (storage.Log.CompletedTxns): still unstable until the HW
	// passes their marker (LastStable), as log recovery fills Kafka's
	// ProducerStateManager.unreplicatedTxns. Entries below HW are ignored.
	Completed []producer.Completed
}

// Batch is one record batch as the state machine sees it: a header plus an
// opaque payload it never reads. The leader assigns BaseOffset and stamps
// Epoch (docs/kafka-replication.md §1.3); followers append batches verbatim.
type Batch struct {
	BaseOffset    int64
	NumRecords    int32 // records in the batch (lastOffsetDelta+1), >= 1
	Epoch         int32 // partitionLeaderEpoch
	ProducerID    int64 // NoProducer if not idempotent
	ProducerEpoch int16
	BaseSeq       int32
	MaxTimestamp  int64
	// Transactional is the batch's transactional attribute: it belongs to
	// its producer's ongoing transaction (opening one if none is).
	Transactional bool
	// Control marks a transaction marker (control batch) written by a
	// transaction coordinator: Aborted says ABORT or COMMIT, and
	// CoordinatorEpoch is the coordinator's epoch. It ends its
	// producer's transaction.
	Control          bool
	Aborted          bool
	CoordinatorEpoch int32
	// BumpedEpoch marks a marker of a transaction version 2 end, whose
	// producer epoch is above its transaction's data (the coordinator
	// bumps it at every end, KIP-890 part 2): a marker whose epoch is not
	// above the epoch of the transaction open here is a late one of an
	// earlier transaction and is refused (INVALID_PRODUCER_EPOCH).
	BumpedEpoch bool
	// Data is the driver's payload (a Kafka v2 batch, or the simulator's
	// record values). It is carried, never inspected or copied.
	Data []byte
	// Abort is set by the machine, in Ready.Append, on an ABORT marker
	// that ended a transaction: the entry the driver's log keeps in its
	// aborted-transaction index with the marker. Nil otherwise.
	Abort *AbortIndex
}

// AbortIndex is one entry of a log's aborted-transaction index (Kafka's
// AbortedTxn in a segment's .txnindex file), decided by the machine, the
// one owner of producer state: read_committed fetches skip the records of
// ProducerID in [FirstOffset, LastOffset].
type AbortIndex struct {
	ProducerID  int64
	FirstOffset int64 // the transaction's first batch
	LastOffset  int64 // its ABORT marker
	// LastStable is the last stable offset right after the marker: the
	// first offset of the oldest transaction still open, or LastOffset+1.
	LastStable int64
}

// LastOffset is the offset of the batch's last record.
func (b *Batch) LastOffset() int64 { return b.BaseOffset + int64(b.NumRecords) - 1 }

// LastSeq is the sequence number of the batch's last record.
func (b *Batch) LastSeq() int32 { return b.BaseSeq + b.NumRecords - 1 }

// ProduceRequest is one partition's part of a Produce request.
type ProduceRequest struct {
	// ID is an opaque handle returned in the ProduceResult.
	ID uint64
	// Acks is AcksNone, AcksLeader, AcksAll or AcksAppended.
	Acks int16
	// Batch is the client's batch; its BaseOffset and Epoch are overwritten.
	Batch Batch
	// DeadlineMs is when an acks=all request still waiting for the HW fails
	// with REQUEST_TIMED_OUT (compared against Tick's clock). 0 = never.
	DeadlineMs int64
	// Origin is who writes the batch: a client's batches have their
	// sequence numbers checked; a coordinator's (the group coordinator's
	// transactional offsets, transaction markers) carry none and only
	// have their producer epoch checked (Kafka's AppendOrigin).
	Origin Origin
	// VerifyGuard, if not zero, is the token of the transaction
	// verification (BeginVerification) made for this transactional
	// batch: it is appended only if its producer's transaction is open
	// here already or no marker for the producer came since the token was
	// issued (KIP-890 part 1's verification guard), else it fails with
	// INVALID_TXN_STATE.
	VerifyGuard uint64
}

// Origin is the source of an appended batch (Kafka's AppendOrigin).
type Origin int8

// Origins.
const (
	OriginClient      Origin = iota // a producer
	OriginCoordinator               // the broker's own coordinators
)

// ProduceResult completes a ProduceRequest.
type ProduceResult struct {
	ID    uint64
	Acks  int16
	Error int16
	// BaseOffset and LastOffset locate the batch in the log (also for a
	// duplicate: the original offsets). -1 on error.
	BaseOffset, LastOffset int64
	// Duplicate is set when the batch was a retry of a retained batch and
	// nothing was appended (docs/kafka-replication.md §7).
	Duplicate bool
}

// FetchRequest is one partition of a Fetch request. A follower builds it with
// Replica.FetchRequest; consumers use ReplicaID = -1.
type FetchRequest struct {
	// Leader is the broker the request is for (filled by FetchRequest; the
	// leader ignores it).
	Leader int32
	// ReplicaID is the fetching broker, or -1 for a consumer.
	ReplicaID int32
	// BrokerEpoch is the follower's broker epoch (KIP-903), -1 if unknown.
	BrokerEpoch int64
	// CurrentLeaderEpoch fences stale requests (KIP-320); -1 skips the check.
	CurrentLeaderEpoch int32
	// FetchOffset is the first offset wanted. For a follower it is its LEO
	// (docs/kafka-replication.md §1.3).
	FetchOffset int64
	// Unflushed is, for a follower, how many offsets below FetchOffset it
	// has not flushed yet: the leader counts FetchOffset-Unflushed, the
	// follower's flushed offset, as its acknowledgement (the durability
	// rule, docs/architecture.md, "Durability"). Zero when everything is
	// flushed, as in every fetch a follower sent before pipelining
	// (docs/replication.md, "Pipelined follower fetches").
	Unflushed int64
	// LastFetchedEpoch is the epoch of the follower's last batch (-1: none);
	// it drives the divergence check (docs/kafka-replication.md §3.4).
	LastFetchedEpoch int32
	// LogStartOffset is the follower's log start offset.
	LogStartOffset int64
	// ReadCommitted is a consumer's isolation level READ_COMMITTED: it
	// reads up to the last stable offset instead of the HW.
	ReadCommitted bool
	// AnyReplica lets a follower answer a consumer, up to its own HW: the
	// consumer sent client metadata (Fetch v11+, KIP-392). Unset, only the
	// leader serves consumers.
	AnyReplica bool
}

// ReadReplica is an in-sync follower the leader may send a consumer to
// (KIP-392's ReplicaView): it holds the consumer's fetch offset.
type ReadReplica struct {
	ID int32
	// LEO is its log end offset as the leader knows it.
	LEO int64
	// SinceCaughtUp is the time since it was last caught up, in the
	// machine's time unit (milliseconds).
	SinceCaughtUp int64
}

// DivergingEpoch tells a follower where its log leaves the leader's
// (docs/kafka-replication.md §3.4).
type DivergingEpoch struct {
	Epoch     int32
	EndOffset int64
}

// FetchResult is the leader's answer to a FetchRequest. Records are not
// copied: the driver reads the batches in [From, To) from its log (to at most
// its byte limits) and sends them.
type FetchResult struct {
	Error int16
	// HW, LogStart and LEO are the leader's, sampled before the read
	// (docs/kafka-replication.md §1.3). On OFFSET_OUT_OF_RANGE they give the
	// follower what ListOffsets would (docs/kafka-replication.md §3.5).
	HW, LogStart, LEO int64
	// From and To bound the records to return: From is the request's fetch
	// offset, To is the LEO for followers, the HW for read_uncommitted
	// consumers and the LSO for read_committed ones.
	From, To int64
	// LSO is the last stable offset (Replica.LastStable), for consumers.
	LSO int64
	// Diverging is set when the follower's log diverged; no records are
	// returned and the follower's state was not updated.
	Diverging *DivergingEpoch
	// TombstoneBound is the leader's Replica.TombstoneBound, for a
	// follower (sent in a tagged field of the Fetch response).
	TombstoneBound int64
}

// FetchResponse is what a follower receives for its FetchRequest, passed to
// HandleFetchResponse. Request must echo the request it answers, so stale or
// reordered responses are ignored.
type FetchResponse struct {
	Request FetchRequest
	FetchResult
	// Batches are the records read from the leader's log, in order.
	Batches []Batch
}

// PartitionState is the controller's view of the partition, as applied from
// metadata (docs/kafka-replication.md §4.4).
type PartitionState struct {
	Leader         int32 // -1: no leader
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	// BrokerEpochs optionally holds, parallel to Replicas, each replica's
	// registered broker epoch (-1: unknown). A fetch with an older epoch is
	// fenced; a replica whose fetches carry another epoch is ineligible.
	BrokerEpochs []int64
	// Ineligible lists replicas that are fenced or in controlled shutdown
	// (KIP-841): they never join the ISR and do not hold back the HW unless
	// already in it.
	Ineligible []int32
	// ELR lists the partition's eligible leader replicas (KIP-966): a
	// fenced or shutting-down one may still be elected, so its log start
	// holds back the low watermark (LowWatermark) as a live replica's
	// does.
	ELR []int32
}

// AlterPartitionRequest is an ISR change proposal (docs/kafka-replication.md
// §2.4): a compare-and-set on (LeaderEpoch, PartitionEpoch).
type AlterPartitionRequest struct {
	// Seq identifies the proposal; return it in the AlterPartitionResult.
	// It is local to this Replica and not part of the wire request.
	Seq            uint64
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	NewISR         []int32
	BrokerEpochs   []int64 // parallel to NewISR, as last seen in fetches
}

// AlterPartitionResult is the controller's answer to an AlterPartitionRequest.
type AlterPartitionResult struct {
	Seq            uint64
	Error          int16
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// Truncation asks the driver to cut the log.
type Truncation struct {
	// Offset is the new log end offset; with Fully, the new log start too.
	Offset int64
	// Fully empties the log and restarts it at Offset (truncateFullyAndStartAt,
	// docs/kafka-replication.md §3.5).
	Fully bool
	// Tiered, with Fully, keeps the log start at LogStart, below Offset:
	// the range between is in the remote log (KIP-405, HandleRemoteAux).
	// The driver then also writes the machine's producer state as the
	// log's snapshot at Offset.
	Tiered   bool
	LogStart int64
}

// Ready is the work the driver must do, in field order, before calling
// Advance. Slices alias the Replica's buffers and are valid until Advance.
//
//  1. Truncate (if set) before appending anything.
//  2. Append the batches, in order, at their BaseOffset.
//  3. Persist Epochs (if non-nil) and, at leisure, HW / LogStart.
//  4. Send Completed produce results: only after steps 1-2 (acks=1 results
//     promise the batch is in the log).
//  5. Send ISRProposal to the controller.
//
// Flushing is separate: when the log's flushed offset advances, call Flushed.
type Ready struct {
	Truncate    *Truncation
	Append      []Batch
	HWChanged   bool
	HW          int64
	LogStart    int64
	LogStartSet bool
	// Epochs is the new epoch-cache content when it changed, else nil.
	Epochs []epoch.Entry
	// Completed are produce requests that are done, in completion order.
	Completed []ProduceResult
	// Deleted are DeleteRecords requests that are done.
	Deleted []DeleteRecordsResult
	// ISRProposal is an AlterPartition to send, or nil.
	ISRProposal *AlterPartitionRequest
	// LogGen counts truncations; pass the value current when a flush started
	// to Flushed so a flush racing a truncation is not misattributed.
	LogGen uint64
}

// IsEmpty reports whether the Ready holds no work.
func (rd *Ready) IsEmpty() bool {
	return rd.Truncate == nil && len(rd.Append) == 0 && !rd.HWChanged && !rd.LogStartSet &&
		rd.Epochs == nil && len(rd.Completed) == 0 && len(rd.Deleted) == 0 && rd.ISRProposal == nil
}
