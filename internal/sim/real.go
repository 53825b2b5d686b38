package sim

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/controller"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/txn"
	"github.com/sluice-io/sluice/internal/vfs"
)

// The real-broker world: the production data plane under the simulator.
// Three internal/broker brokers run in step mode (sbroker.Options.Steps) on
// one goroutine: real replica machines, real storage on crashable
// in-memory file systems, real follower fetchers whose Fetch and
// ListOffsets cross a simulated network into the leader's real request
// handlers (protocol.Local), the real metadata reconciliation applying
// images from a simulated controller (realctl.go), all on one manual
// clock. A seeded PRNG picks every step: a broker's tick, flush, fetch
// round or ISR proposal, a produce, time passing, a crash that loses
// unsynced data, a restart, a cut link. Invariants are checked as it runs
// and after a final heal-and-settle phase; the same seed gives the same
// trace.

// RealOptions configures RunReal. Zero fields take defaults.
type RealOptions struct {
	Seed  uint64
	Steps int // simulation steps before the settle phase (default 3000)
	// Verbose keeps the whole trace instead of the last TraceTail lines.
	Verbose   bool
	TraceTail int // default 300

	// CheckWriters runs the brokers with broker.Options.CheckWriters:
	// a change of a partition's log outside a step of its owner is a
	// violation.
	CheckWriters bool

	// knobs and ctlKnobs re-introduce fixed driver and controller bugs
	// (real_test.go), txnKnobs transaction coordinator bugs
	// (realcoord_test.go).
	knobs    sbroker.Knobs
	ctlKnobs controller.Knobs
	txnKnobs txn.Knobs

	// Share runs a share group on realShareTopic (realshare.go) and a
	// classic group (realclassic.go); shareKnobs re-introduce share
	// partition bugs (realshare_test.go).
	Share      bool
	shareKnobs share.Knobs

	// Tiered runs tiered storage on realTieredTopic with the brokers'
	// remote log managers and one shared object store (realtier.go).
	Tiered bool
}

// RealStats counts what a run did.
type RealStats struct {
	Crashes, Restarts, Fences, Cuts, ISRChanges, Produced, Acked, Failed int
	// Shutdowns counts controlled shutdowns granted; CtlFailovers the
	// controller's failovers.
	Shutdowns, CtlFailovers int
	// AckedOne counts acks=1 acknowledgements checked; Deletes the
	// DeleteRecords answered; ProducersExpired the idempotent producers
	// back from a pause that their leader had forgotten
	// (producer.id.expiration.ms).
	AckedOne, Deletes, ProducersExpired int
	// Retained counts retention passes that raised a log start; Cleans
	// the log cleaner passes that cleaned realCompactTopic (StepClean,
	// realcompact.go).
	Retained, Cleans int
	// Wipes counts disks wiped before a restart (realelr.go).
	Wipes int
	// Transactions (realtxn.go): completed by commit or abort, and
	// coordinator failovers.
	TxnCommitted, TxnAborted, TxnFailovers, TxnLateMarkers int
	// GroupCommits counts acknowledged offset commits (realgroup.go).
	GroupCommits int
	// The share group (realshare.go): fetches answered, records
	// acquired, acknowledgements confirmed, members crashed and stalled.
	ShareFetches, ShareAcquired, ShareAccepted, ShareRejected, ShareReleased, ShareCrashes, ShareStalls int
	// ClassicSyncs counts the classic group's SyncGroup answers
	// (realclassic.go).
	ClassicSyncs int
	// Tiered storage (realtier.go): remote log manager steps, records
	// checkTiered read below the leader's local log start, object store
	// faults injected.
	RemoteSteps, RemoteReads, StoreFaults int
}

// add adds o's counts to s.
func (s *RealStats) add(o RealStats) {
	s.Crashes += o.Crashes
	s.Restarts += o.Restarts
	s.Fences += o.Fences
	s.Cuts += o.Cuts
	s.ISRChanges += o.ISRChanges
	s.Produced += o.Produced
	s.Acked += o.Acked
	s.Failed += o.Failed
	s.Shutdowns += o.Shutdowns
	s.CtlFailovers += o.CtlFailovers
	s.AckedOne += o.AckedOne
	s.Deletes += o.Deletes
	s.ProducersExpired += o.ProducersExpired
	s.Retained += o.Retained
	s.Cleans += o.Cleans
	s.Wipes += o.Wipes
	s.TxnCommitted += o.TxnCommitted
	s.TxnAborted += o.TxnAborted
	s.TxnFailovers += o.TxnFailovers
	s.TxnLateMarkers += o.TxnLateMarkers
	s.GroupCommits += o.GroupCommits
	s.ShareFetches += o.ShareFetches
	s.ShareAcquired += o.ShareAcquired
	s.ShareAccepted += o.ShareAccepted
	s.ShareRejected += o.ShareRejected
	s.ShareReleased += o.ShareReleased
	s.ShareCrashes += o.ShareCrashes
	s.ShareStalls += o.ShareStalls
	s.ClassicSyncs += o.ClassicSyncs
	s.RemoteSteps += o.RemoteSteps
	s.RemoteReads += o.RemoteReads
	s.StoreFaults += o.StoreFaults
}

// RealResult is the outcome of RunReal.
type RealResult struct {
	Seed      uint64
	Violation string
	Trace     []string
	Stats     RealStats
	share     bool // the run had the share group
	tiered    bool // the run had tiered storage
}

// Report renders a failure for a test log.
func (r *RealResult) Report() string {
	var b strings.Builder
	flags := ""
	if r.share && r.Seed%5 != 0 {
		flags = " -real.share"
	}
	if r.tiered && r.Seed%realTieredSeeds != 0 {
		flags += " -real.tiered"
	}
	fmt.Fprintf(&b, "seed %d: %s\nreplay: go test ./internal/sim -run TestRealSeeds -real.seed=%d%s -v\n--- trace (last %d lines) ---\n",
		r.Seed, r.Violation, r.Seed, flags, len(r.Trace))
	for _, l := range r.Trace {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// Timing of the real world, in simulated ms.
const (
	realBrokers         = 3
	realSessionMs       = 300 // broker.session.timeout.ms of the simulated controller
	realDropP           = 0.02
	realSettleSteps     = 1000
	realSettleWork      = 500 // settle rounds with a workload, then it may end once converged
	realCheckEvery      = 25  // steps between full acknowledged-record checks
	realMaxDown         = 2
	realProduceDeadline = 2 * time.Second
	// realProducerExpiryMs is the brokers' producer.id.expiration.ms;
	// realDeliveryTimeout the idempotent producers' delivery.timeout.ms,
	// below it as Kafka requires.
	realProducerExpiryMs = 3000
	realDeliveryTimeout  = 1500 * time.Millisecond
)

var errUnreachable = errors.New("sim: unreachable")

type realBroker struct {
	id     int32
	up     bool
	downAt time.Time // crash time, for the controller's session expiry
	fs     *vfs.Mem
	b      *sbroker.Broker
	reg    *protocol.Registry
	h      *handler.Handlers
	// hw and lso are the last high watermark and last stable offset seen
	// per partition as leader, with its leader epoch: neither goes back
	// within an epoch.
	hw, lso map[string][2]int64
	// flushed is each partition's flushed offset, as last seen while up:
	// what the disk keeps while the broker is down.
	flushed map[string]int64
	// proposalSince is when each partition it leads last began holding
	// an unsent ISR change (checkProposal).
	proposalSince map[string]time.Time
	// last is the image the broker applied last before it crashed: what
	// it replays on restart. pendingReg is its registration, committed at
	// regAt.
	last       *metadata.Image
	pendingReg *rnode
	self       metadata.Broker
	regAt      time.Time
	// diskEpoch is the broker epoch its disk recorded at its last
	// registration (synced, so a crash keeps it); -1 for a new or wiped
	// disk: the next registration's previous epoch (KIP-966).
	diskEpoch int64
	// dir is its disk's directory id (a wipe gives a new one).
	dir string
}

type ackedRec struct {
	off   int64
	value string
}

type pendingProduce struct {
	broker int32
	topic  string
	value  string
	ch     <-chan replica.ProduceResult
	idem   *idemProducer // nil for the plain producer
	acks   int16         // -1 (all) or 1
}

// idemProducer is an idempotent producer of one topic with one batch in
// flight: a batch that fails in a retriable way (or whose leader crashed
// before answering) is sent again with the same sequence; OUT_OF_ORDER or
// INVALID_PRODUCER_EPOCH bump the epoch and abandon it, as a client does.
type idemProducer struct {
	pid      int64
	epoch    int16
	seq      int32
	value    string // the batch being sent, "" if none
	inflight bool
	// firstTry is when the batch being sent was first sent; idleUntil
	// holds the producer back (it pauses past the brokers'
	// producer.id.expiration.ms, realProducerExpiryMs).
	firstTry, idleUntil time.Time
}

type realWorld struct {
	opts  RealOptions
	rng   *rand.Rand
	clk   *clock.Manual
	start time.Time

	brokers []*realBroker // index id-1
	ctrl    *rctl
	// topics are every topic; txnTopics those the transactions write
	// (realDeleteTopic takes DeleteRecords instead, reallog.go;
	// realCompactTopic is compacted, realcompact.go).
	topics, txnTopics []string
	// cmp is what the world knows of realCompactTopic's committed log.
	cmp *simCompact
	// elr is the eligible-leader-replica side (realelr.go).
	elr elrState
	// deleted is the highest offset a DeleteRecords asked for per topic
	// (acknowledged or consumed records below it may be gone), and
	// deleteAcked the highest one answered (every replica must keep its
	// log start at or above it); deletes are those awaiting an answer.
	deleted, deleteAcked map[string]int64
	deletes              []pendingDelete

	cutFromController map[int32]bool
	cut               map[[2]int32]bool // one-way links from→to that drop everything
	conns             map[[2]int32]*protocol.Local

	seq     int
	acked   map[string][]ackedRec
	pending []pendingProduce
	idem    map[string]*idemProducer
	// consumed is what consumers read below a leader's HW, per topic:
	// offset → value; next is where each topic's consumer goes on.
	consumed map[string]map[int64]string
	next     map[string]int64
	nextRC   map[string]int64 // the read_committed consumer's

	txn        *simTxn     // the transactional producer and its coordinator
	grp        *simGroup   // the offset committer and the group coordinators
	shr        *simShare   // the share group (realshare.go)
	tier       *simTier    // tiered storage (realtier.go)
	cls        *simClassic // the classic group (realclassic.go)
	txnPending []pendingTxn

	settling bool // the final phase: no faults, no losses

	stats     RealStats
	trace     []string
	traceNext int
	failed    string
}

// RunReal runs one simulation of real brokers.
func RunReal(opts RealOptions) *RealResult {
	if opts.Steps <= 0 {
		opts.Steps = 3000
	}
	if opts.TraceTail <= 0 {
		opts.TraceTail = 300
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &realWorld{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x5851f42d4c957f2d)),
		clk: clock.NewManual(start), start: start, cutFromController: map[int32]bool{}, cut: map[[2]int32]bool{},
		conns: map[[2]int32]*protocol.Local{}, acked: map[string][]ackedRec{}, idem: map[string]*idemProducer{},
		consumed: map[string]map[int64]string{}, next: map[string]int64{}, nextRC: map[string]int64{}, txn: newSimTxn(), grp: newSimGroup(),
		deleted: map[string]int64{}, deleteAcked: map[string]int64{}, cmp: newSimCompact(), elr: newELRState(opts.Seed)}
	w.shr, w.cls = newSimShare(opts.Share), newSimClassic()
	w.tier = newSimTier(opts.Tiered, opts.Seed)
	w.ctrl = newRctl(w)
	w.txn.tv2 = opts.Seed%2 == 0
	w.setup()
	if w.shr.on {
		w.shareSetup()
	}
	for i := 0; i < opts.Steps && w.failed == ""; i++ {
		if i > 0 && i%realTierCalm == 0 && !w.nemesisAt(i) {
			w.calm()
		}
		w.step(w.nemesisAt(i))
		if w.failed == "" && i%realCheckEvery == 0 {
			w.checkAcked()
		}
	}
	if w.failed == "" {
		w.settle()
	}
	if w.failed == "" {
		w.checkShareSettled()
	}
	for _, rb := range w.brokers {
		if rb.up {
			w.checkWriters(rb)
			rb.h.Close()
			rb.b.Close()
		}
	}
	w.stats.GroupCommits = w.grp.commits
	sh := w.shr
	w.stats.ShareFetches, w.stats.ShareAcquired, w.stats.ShareAccepted, w.stats.ShareRejected = sh.fetches, sh.acquired, sh.accepted, sh.rejected
	w.stats.ShareReleased, w.stats.ShareCrashes, w.stats.ShareStalls = sh.released, sh.memberCrashes, sh.stalls
	w.stats.ClassicSyncs = w.cls.syncs
	if w.tier.on {
		c := w.tier.store.Counts()
		w.stats.RemoteReads, w.stats.StoreFaults = w.tier.remoteRead, c.Errors+c.Partials+c.Outages
	}
	res := &RealResult{Seed: opts.Seed, Violation: w.failed, Stats: w.stats, share: opts.Share, tiered: opts.Tiered}
	if opts.Verbose || len(w.trace) < opts.TraceTail {
		res.Trace = w.trace
	} else {
		res.Trace = append(append([]string{}, w.trace[w.traceNext:]...), w.trace[:w.traceNext]...)
	}
	return res
}

func (w *realWorld) tracef(format string, args ...any) {
	line := fmt.Sprintf("%7d ", w.clk.Now().Sub(w.start).Milliseconds()) + fmt.Sprintf(format, args...)
	if w.opts.Verbose || len(w.trace) < w.opts.TraceTail {
		w.trace = append(w.trace, line)
		return
	}
	w.trace[w.traceNext] = line
	w.traceNext = (w.traceNext + 1) % len(w.trace)
}

func (w *realWorld) fail(format string, args ...any) {
	if w.failed == "" {
		w.failed = fmt.Sprintf(format, args...)
		w.tracef("VIOLATION: %s", w.failed)
	}
}

func (w *realWorld) chance(p float64) bool { return w.rng.Float64() < p }

func fmtPart(topic string, p metadata.Partition) string {
	elr := ""
	if len(p.ELR) > 0 || len(p.LastKnownELR) > 0 {
		elr = fmt.Sprintf(" elr %v last %v", p.ELR, p.LastKnownELR)
	}
	return fmt.Sprintf(" %s-%d[leader %d epoch %d/%d isr %v%s]", topic, p.Index, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR, elr)
}

// setup starts three brokers and creates four RF 3 topics with min ISR 2:
// t0 and t1, realDeleteTopic and realCompactTopic.
func (w *realWorld) setup() {
	for id := int32(1); id <= realBrokers; id++ {
		rb := &realBroker{id: id, fs: vfs.NewMem(), diskEpoch: -1, dir: w.newDir(), hw: map[string][2]int64{}, lso: map[string][2]int64{}, flushed: map[string]int64{}}
		w.brokers = append(w.brokers, rb)
		w.startBroker(rb)
	}
	// Each broker heartbeats once, caught up: the controller unfences it.
	for _, id := range w.ctrl.ids() {
		w.ctrl.heartbeat(w.ctrl.nodes[id], 0)
	}
	for i, name := range []string{"t0", "t1", realDeleteTopic, realCompactTopic} {
		w.topics = append(w.topics, name)
		if name != realDeleteTopic && name != realCompactTopic {
			w.txnTopics = append(w.txnTopics, name)
		}
		w.idem[name] = &idemProducer{pid: 1000 + int64(i)}
		cfgs := map[string]string{"min.insync.replicas": strconv.Itoa(minISR(name))}
		if name == realDeleteTopic {
			// Time-based retention too: whole segments older than 2 s go
			// (StepRetention), on the leader and the followers alike.
			cfgs["retention.ms"], cfgs["segment.ms"] = "2000", "500"
		}
		if name == realCompactTopic {
			realCompactConfig(cfgs)
		}
		if err := w.brokers[0].b.CreateTopic(name, 1, realBrokers, cfgs, false); err != nil {
			w.fail("create topic %s: %v", name, err)
		}
	}
	if w.tier.on {
		w.createTieredTopics()
	}
	w.createTxnTopic()
	w.createOffsetsTopic()
	if w.shr.on {
		w.createShareTopics()
	}
}

func (w *realWorld) brokerConfig(id int32) *config.Broker {
	cfg := config.Defaults()
	cfg.NodeID = id
	cfg.DataDir = "/data"
	cfg.Listen = "127.0.0." + strconv.Itoa(int(id)) + ":9092"
	cfg.Props["replica.lag.time.max.ms"] = "400"
	cfg.Props["replica.fetch.backoff.ms"] = "50"
	cfg.Props["log.segment.bytes"] = "2048"
	cfg.Props["unclean.leader.election.enable"] = "false"
	cfg.Props["group.initial.rebalance.delay.ms"] = "0"
	cfg.Props["producer.id.expiration.ms"] = strconv.Itoa(realProducerExpiryMs)
	cfg.Props["producer.id.expiration.check.interval.ms"] = "500"
	if w.shr.on {
		shareBrokerConfig(cfg.Props)
	}
	if w.tier.on {
		tieredBrokerConfig(cfg.Props)
	}
	// A third of the seeds make every flush round one syncfs of the
	// broker's Mem (storage.SyncRound), a third never use syncfs, the rest
	// keep the default threshold.
	switch w.opts.Seed % 3 {
	case 0:
		cfg.Props["sluice.log.flush.syncfs.min.partitions"] = "1"
	case 1:
		cfg.Props["sluice.log.flush.syncfs.min.partitions"] = "0"
	}
	return cfg
}

// startBroker registers rb with the controller (a new broker epoch) and
// opens it on its file system.
func (w *realWorld) startBroker(rb *realBroker) {
	cfg := w.brokerConfig(rb.id)
	self, err := sbroker.SelfBroker(cfg)
	if err != nil {
		w.fail("broker %d: %v", rb.id, err)
		return
	}
	rb.up = true
	n := w.ctrl.node(rb.id, rb.last)
	opts := sbroker.Options{Config: cfg, FS: rb.fs, Clock: w.clk, Controller: n, Steps: true, CheckWriters: w.opts.CheckWriters,
		Transport: simTransport{w: w, from: rb.id}, Knobs: &w.opts.knobs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnFatal: func(err error) { w.fail("broker %d halted: %v", rb.id, err) }}
	if w.tier.on {
		opts.RemoteStore, opts.Rand = w.tier.store, w.brokerRand()
	}
	b, err := sbroker.Open(opts)
	if err != nil {
		w.fail("open broker %d: %v", rb.id, err)
		rb.up = false
		return
	}
	rb.b = b
	rb.reg = protocol.NewRegistry()
	rb.h = w.registerHandlers(rb)
	rb.hw, rb.lso, rb.proposalSince = map[string][2]int64{}, map[string][2]int64{}, map[string]time.Time{}
	rb.pendingReg, rb.self = n, self
	if rb.last == nil || w.settling {
		w.register(rb)
	} else {
		// A restart: the broker replays its old metadata first; the
		// registration commits a little later.
		rb.regAt = w.clk.Now().Add(time.Duration(w.rng.IntN(100)) * time.Millisecond)
		w.tracef("broker %d started, registering", rb.id)
	}
}

// register sends rb's pending registration; an unanswered one is sent
// again 50 ms later.
func (w *realWorld) register(rb *realBroker) {
	n := rb.pendingReg
	if err := w.ctrl.register(n, rb.self); err != nil {
		rb.regAt = w.clk.Now().Add(50 * time.Millisecond)
		return
	}
	rb.pendingReg = nil
	w.tracef("broker %d registered, epoch %d", rb.id, n.BrokerEpoch())
}

// crash stops rb as a power loss would: its file system keeps what was
// synced and a random part of the rest; the broker object is dropped.
func (w *realWorld) crash(rb *realBroker) {
	w.stop(rb)
	rb.fs = rb.fs.Crash(mrand.New(mrand.NewSource(int64(w.rng.Uint64()))))
	w.stats.Crashes++
	w.tracef("broker %d crashed", rb.id)
}

// checkWriters fails the run if a change of one of rb's logs ran outside
// its partition owner's steps (RealOptions.CheckWriters).
func (w *realWorld) checkWriters(rb *realBroker) {
	if n, which := rb.b.WriterViolations(); n > 0 {
		w.fail("broker %d: %d log changes outside their partition's owner: %s", rb.id, n, which)
	}
}

// stop takes rb down: its connections close, its requests in flight go
// unanswered.
func (w *realWorld) stop(rb *realBroker) {
	w.stopShare(rb.id)
	w.checkWriters(rb)
	rb.b.StopRemoteStep() // a pass parked in the middle ends there
	rb.up = false
	rb.downAt = w.clk.Now()
	rb.last = rb.b.Image()
	rb.pendingReg = nil
	rb.h.Close()
	for k, l := range w.conns {
		if k[0] == rb.id || k[1] == rb.id {
			l.Close()
			delete(w.conns, k)
		}
	}
	kept := w.pending[:0]
	for _, pp := range w.pending {
		if pp.broker != rb.id {
			kept = append(kept, pp)
		} else if pp.idem != nil {
			w.idemDone(pp.idem, -1) // no answer: send the batch again
		}
	}
	w.pending = kept
	w.crashTxn(rb.id)
	w.stopDeletes(rb.id)
}

// shutdownGranted completes rb's controlled shutdown (docs/kafka-replication.md §4.3).
// A handoff (rb was not fenced: the grant waited until it led nothing and
// every other active broker had applied its shutdown) promises that no
// broker the controller counts as active still follows rb or keeps it in
// an ISR it leads; a fenced broker is granted at once and promises
// nothing (it left every ISR when fenced, and brokers cut off with it may
// not know yet). Then rb closes cleanly (every log flushed) and stops, to
// restart later.
func (w *realWorld) shutdownGranted(rb *realBroker, handoff bool) {
	im := w.ctrl.image()
	for _, y := range w.brokers {
		if !handoff || y == rb || !y.up || !im.Brokers[y.id].Active() {
			continue
		}
		for _, p := range y.b.Partitions() {
			st := p.Status(nil)
			switch {
			case st.Role == "follower" && st.Leader == rb.id:
				w.fail("%s-%d@%d still follows broker %d (epoch %d) when its controlled shutdown completes", p.Topic, p.Partition, y.id, rb.id, st.LeaderEpoch)
				return
			case st.Role == "leader" && slices.Contains(st.ISR, rb.id):
				w.fail("%s-%d@%d leads with ISR %v including broker %d when its controlled shutdown completes", p.Topic, p.Partition, y.id, st.ISR, rb.id)
				return
			}
		}
	}
	b := rb.b
	w.stop(rb)
	if err := b.Close(); err != nil {
		w.fail("closing broker %d: %v", rb.id, err)
	}
	w.stats.Shutdowns++
	w.tracef("broker %d stopped (controlled shutdown granted)", rb.id)
}

func (w *realWorld) upBrokers() []*realBroker {
	var out []*realBroker
	for _, rb := range w.brokers {
		if rb.up {
			out = append(out, rb)
		}
	}
	return out
}

// step runs one simulation step; faults only when nemesis is set.
func (w *realWorld) step(nemesis bool) {
	w.control(0.5)
	up := w.upBrokers()
	r := w.rng.IntN(100)
	switch {
	case r < 25:
		w.clk.Advance(time.Duration(1+w.rng.IntN(30)) * time.Millisecond)
	case r < 75 && len(up) > 0:
		rb := up[w.rng.IntN(len(up))]
		if w.tier.on && w.chance(realTierStepP) {
			w.remoteStep(rb)
			break
		}
		// ISR proposals go out on 1 step in 25: each stays in flight
		// a while, as over a slow link to the controller.
		switch k := w.rng.IntN(100); {
		case k < 39:
			rb.b.StepFetch()
		case k < 68:
			rb.b.StepFlush()
		case k < 93:
			rb.b.StepTick()
		case k < 94:
			w.retention(rb)
		case k < 96:
			w.clean(rb)
		default:
			rb.b.StepAlter()
		}
	case r < 80:
		w.produce()
	case r < 86:
		w.txnStep(true)
	case r < 89:
		w.consume()
	case r < 90:
		w.deleteRecords()
	case !nemesis:
	case r < 93 && len(up) > realBrokers-realMaxDown:
		w.crash(up[w.rng.IntN(len(up))])
	case r < 96:
		var down []*realBroker
		for _, rb := range w.brokers {
			if !rb.up {
				down = append(down, rb)
			}
		}
		if len(down) > 0 {
			rb := down[w.rng.IntN(len(down))]
			w.stats.Restarts++
			w.maybeWipe(rb)
			w.startBroker(rb)
		}
	case r < 98:
		from, to := int32(1+w.rng.IntN(realBrokers)), int32(1+w.rng.IntN(realBrokers))
		if from != to {
			k := [2]int32{from, to}
			w.cut[k] = !w.cut[k]
			w.stats.Cuts++
			w.tracef("link %d->%d cut=%v", from, to, w.cut[k])
		}
	case r < 99:
		id := int32(1 + w.rng.IntN(realBrokers))
		w.cutFromController[id] = !w.cutFromController[id]
		w.tracef("broker %d cut from the controller=%v", id, w.cutFromController[id])
	case w.chance(0.5):
		w.ctrl.startFailover()
	case len(up) > realBrokers-realMaxDown:
		// SIGTERM: the broker asks for a controlled shutdown in its
		// next heartbeats.
		n := w.ctrl.nodes[up[w.rng.IntN(len(up))].id]
		if !n.wantDown && n.epoch >= 0 {
			n.wantDown = true
			w.tracef("SIGTERM broker %d (controlled shutdown)", n.id)
		}
	}
	w.collect()
	w.collectTxn()
	w.collectDeletes()
	w.shareStep(nemesis)
	w.classicStep(nemesis)
	if w.tier.on {
		if w.chance(realTierProduceP) {
			w.produceTo(realTieredTopic)
		}
		w.storeFaults()
		w.checkLocalCopied(false)
		w.checkCopiedBelowHW()
	}
	if w.chance(0.3) {
		// Transactions need several steps each (produce, decide,
		// markers): they move on most steps, not only on their own.
		w.txnStep(true)
		w.collectTxn()
	}
	w.checkHW()
}

// control sends due registrations and runs the controller's step.
func (w *realWorld) control(lag float64) {
	now := w.clk.Now()
	for _, rb := range w.brokers {
		if rb.up && rb.pendingReg != nil && !now.Before(rb.regAt) {
			w.register(rb)
		}
	}
	w.ctrl.step(lag)
}

// produce sends one acks=all batch of one record to the partition's
// current leader (as the image names it).
func (w *realWorld) produce() {
	w.produceTo(w.topics[w.rng.IntN(len(w.topics))])
}

// produceTo is produce to topic.
func (w *realWorld) produceTo(topic string) {
	leader := w.ctrl.image().Topics[topic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up {
		return
	}
	rb := w.brokers[leader-1]
	p, err := rb.b.LeaderBy(topic, 0, time.Time{})
	if err != nil {
		return
	}
	opts := batchtest.Options{BaseTimestamp: w.clk.Now().UnixMilli()}
	var value string
	acks := int16(-1)
	ip := w.idem[topic]
	if w.rng.IntN(2) == 0 {
		if ip.inflight || w.clk.Now().Before(ip.idleUntil) {
			return
		}
		if ip.value != "" && w.clk.Now().Sub(ip.firstTry) > realDeliveryTimeout {
			// delivery.timeout.ms, below producer.id.expiration.ms: the
			// client gives the batch up (it may be in the log once) and
			// bumps its epoch (KIP-360), so a retry never reaches a
			// broker that has forgotten the producer.
			w.tracef("producer %d gives up %s, bumps its epoch to %d", ip.pid, ip.value, ip.epoch+1)
			ip.epoch++
			ip.seq, ip.value = 0, ""
		}
		if ip.value == "" {
			if !w.settling && w.chance(0.01) {
				// Idle for longer than producer.id.expiration.ms: the
				// brokers forget it, and its next batch starts with
				// UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER.
				ip.idleUntil = w.clk.Now().Add(realProducerExpiryMs*time.Millisecond + time.Second)
				w.tracef("producer %d idles until %d", ip.pid, ip.idleUntil.Sub(w.start).Milliseconds())
				return
			}
			if !ip.idleUntil.IsZero() {
				// Back from a pause: count whether the leader forgot it.
				ip.idleUntil = time.Time{}
				if !slices.ContainsFunc(p.ActiveProducers(), func(pi sbroker.ProducerInfo) bool { return pi.ProducerID == ip.pid }) {
					w.stats.ProducersExpired++
				}
			}
			w.seq++
			ip.value = fmt.Sprintf("%s-i%d", topic, w.seq)
			ip.firstTry = w.clk.Now()
		}
		value = ip.value
		opts.Idempotent, opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = true, ip.pid, ip.epoch, ip.seq
		ip.inflight = true
	} else {
		ip = nil
		w.seq++
		value = fmt.Sprintf("%s-%d", topic, w.seq)
		if w.rng.IntN(3) == 0 && topic != realCompactTopic {
			acks = 1
			value = fmt.Sprintf("%s-a%d", topic, w.seq)
		}
	}
	w.noteSent(topic, value)
	recs := batchtest.Values(value)
	if topic == realCompactTopic {
		recs = w.compactRecords(value)
	}
	data := batchtest.Build(opts, recs)
	h, err := batch.ParseHeader(data)
	if err != nil {
		w.fail("batch: %v", err)
		return
	}
	w.stats.Produced++
	w.pending = append(w.pending, pendingProduce{broker: leader, topic: topic, value: value, idem: ip, acks: acks,
		ch: p.Produce(data, h, acks, w.clk.Now().Add(realProduceDeadline))})
}

// idemDone applies an answer (or a lost one: code -1) to the idempotent
// producer's batch.
func (w *realWorld) idemDone(ip *idemProducer, code int16) {
	ip.inflight = false
	switch code {
	case 0:
		ip.value = ""
		ip.seq++
	case kerr.OutOfOrderSequenceNumber.Code, kerr.InvalidProducerEpoch.Code, kerr.UnknownProducerID.Code:
		// Fatal for the batch: a new epoch starts at sequence 0; the batch
		// is abandoned (it may still be in the log once: it must not be
		// twice).
		ip.epoch++
		ip.seq = 0
		ip.value = ""
		w.tracef("producer %d bumps its epoch to %d (%s)", ip.pid, ip.epoch, kerr.ErrorForCode(code))
	}
}

// consume reads a topic from the current leader as a consumer does (a
// fetch with no replica id) and remembers every record: a consumer must
// only ever see committed records, so each must be in the final log at its
// offset (checked after settling). Half the reads are read_committed: up
// to the last stable offset, with the client's aborted-transaction
// filtering (realtxn.go); they must never return a record of a
// transaction that was not committed.
func (w *realWorld) consume() {
	topic := w.topics[w.rng.IntN(len(w.topics))]
	if topic == realTieredTopic {
		w.tieredConsume()
		return
	}
	leader := w.ctrl.image().Topics[topic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up {
		return
	}
	p, err := w.brokers[leader-1].b.PartitionBy(topic, 0, time.Time{})
	if err != nil {
		return
	}
	rc := w.chance(0.5)
	next := w.next
	if rc {
		next = w.nextRC
	}
	res, sl, err := p.Fetch(replica.FetchRequest{ReplicaID: -1, BrokerEpoch: -1, CurrentLeaderEpoch: -1,
		FetchOffset: next[topic], LastFetchedEpoch: -1, LogStartOffset: -1, ReadCommitted: rc}, 1<<16, true)
	if err == nil && res.Error == kerr.OffsetOutOfRange.Code && next[topic] < res.LogStart {
		next[topic] = res.LogStart // auto.offset.reset=earliest, after a DeleteRecords
		return
	}
	if err == nil && res.Error == 0 {
		w.elr.seenHW[topic] = max(w.elr.seenHW[topic], res.HW)
		if rc {
			w.noteStableShown(topic, res.LSO)
		}
	}
	if err != nil || res.Error != 0 || sl.Size == 0 {
		return
	}
	b, err := sl.AppendTo(nil)
	if err != nil {
		return
	}
	if w.consumed[topic] == nil {
		w.consumed[topic] = map[int64]string{}
	}
	limit, where := res.HW, fmt.Sprintf("consumer of %s-0 on broker %d", topic, leader)
	if rc {
		limit, where = res.LSO, "read_committed "+where
	}
	var aborted []storage.AbortedTxn
	if rc {
		aborted = p.Log().AbortedTxns(next[topic], sl.NextOffset)
	}
	bad := false
	err = committedFilter(b, aborted, func(off int64, value []byte) {
		if bad {
			return
		}
		if off >= limit {
			w.fail("%s got offset %d at or above its limit %d (HW %d)", where, off, limit, res.HW)
			bad = true
			return
		}
		if v, ok := w.consumed[topic][off]; ok && v != string(value) {
			w.fail("%s read %q at %d, earlier %q", where, value, off, v)
			bad = true
			return
		}
		if rc {
			w.checkCommittedRead(fmt.Sprintf("%s at %d (LSO %d, HW %d, aborted %v)", where, off, res.LSO, res.HW, aborted), string(value))
		}
		w.consumed[topic][off] = string(value)
		if topic == realCompactTopic {
			w.compactLearn(off, string(value), where)
		}
	})
	if err != nil {
		w.fail("%s: a bad batch: %v", where, err)
		return
	}
	next[topic] = sl.NextOffset
}

// collect takes the answers that arrived.
func (w *realWorld) collect() {
	kept := w.pending[:0]
	for _, pp := range w.pending {
		select {
		case res := <-pp.ch:
			if pp.idem != nil {
				w.idemDone(pp.idem, res.Error)
			}
			if res.Error != 0 {
				w.stats.Failed++
				continue
			}
			if pp.acks == 1 {
				w.ackedOne(pp, res.BaseOffset)
				continue
			}
			w.stats.Acked++
			w.acked[pp.topic] = append(w.acked[pp.topic], ackedRec{off: res.BaseOffset, value: pp.value})
			if pp.topic == realCompactTopic {
				w.compactLearn(res.BaseOffset, pp.value, fmt.Sprintf("acknowledged by %d", pp.broker))
			}
			w.tracef("acked %s at %s-0@%d by %d", pp.value, pp.topic, res.BaseOffset, pp.broker)
		default:
			kept = append(kept, pp)
		}
	}
	w.pending = kept
}
