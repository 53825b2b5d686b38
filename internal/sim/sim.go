// Package sim is a deterministic simulator for the replica state machine
// (after TigerBeetle's VOPR, FoundationDB's simulation). Several
// brokers' replicas of several partitions run in one goroutine; a seeded PRNG
// drives everything; time is simulated; the network delays, drops, reorders
// and cuts messages (also one way); disks lose a random part of their
// unsynced suffix on a crash; brokers also stop by controlled shutdown and
// keep a metadata log they replay on restart (meta.go, shutdown.go); a
// minimal controller elects leaders, commits ISR changes by compare-and-set
// and grants controlled shutdowns; producers (acks=all and acks=1,
// idempotent) and consumers run a workload. Invariants (check.go) are
// checked after every step, liveness at the end. The same seed always
// produces the same run.
package sim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Options configures a run. Zero fields take defaults.
type Options struct {
	Seed  uint64
	Steps int // events to run before the final heal-and-settle phase (default 4000)
	// Verbose keeps the whole trace (for replays) instead of a ring of the
	// last TraceTail lines.
	Verbose   bool
	TraceTail int // default 400

	// bugs restores fixed broker bugs, so tests can check that the
	// simulator still finds them (sim_test.go TestOldBugsAreCaught).
	bugs bugs
}

// bugs are test-only switches, each restoring an old behaviour of the real
// driver or controller that the chaos harness caught.
type bugs struct {
	// earlyShutdownGrant grants a controlled shutdown as soon as the broker
	// leads nothing, before the other brokers applied the change (before
	// 1cf2b54).
	earlyShutdownGrant bool
	// actOnReplayedMetadata makes a restarting broker act on the metadata
	// it replays and receives before its registration (before 3369e98).
	actOnReplayedMetadata bool
	// dropQueuedISR drops an ISR proposal the machine makes while another
	// is in flight (before 1cf2b54).
	dropQueuedISR bool
}

// Result is the outcome of a run.
type Result struct {
	Seed      uint64
	Steps     int
	Violation string // empty if every invariant held
	Trace     []string
	Stats     Stats
}

// Stats counts what happened, to show the simulator exercised something.
type Stats struct {
	Crashes, Shutdowns, Partitions, Elections, UncleanElections, ISRChanges int
	AckedAll, AckedOne, Consumed, Truncations, Diverging                    int
	LostCommittedUnclean                                                    int
}

// Failed reports whether an invariant was violated.
func (r *Result) Failed() bool { return r.Violation != "" }

// Report renders the failure for a test log.
func (r *Result) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %s\nreplay: go test ./internal/sim -run TestSeeds -seed=%d\n--- trace (last %d lines) ---\n",
		r.Seed, r.Violation, r.Seed, len(r.Trace))
	for _, l := range r.Trace {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// Node ids: the controller is 0, brokers 1..N, clients from clientBase.
const (
	controllerID = 0
	clientBase   = 100
)

type event struct {
	at  int64
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || (q[i].at == q[j].at && q[i].seq < q[j].seq)
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// world is one simulation run.
type world struct {
	opts  Options
	rng   *rand.Rand
	now   int64
	seq   uint64
	queue eventQueue

	topics  []topic
	brokers []*broker // index = id-1
	ctrl    *controller
	net     *network
	clients []client
	check   *checker
	stats   Stats
	nextReq uint64
	nextRec uint64
	reqs    map[uint64]*producer

	trace      []string
	traceNext  int
	failed     string
	nemesisOff bool
}

// topic is one simulated partition's configuration.
type topic struct {
	name     string
	replicas []int32
	minISR   int
	unclean  bool
}

func (w *world) at(delay int64, fn func()) {
	w.seq++
	heap.Push(&w.queue, &event{at: w.now + delay, seq: w.seq, fn: fn})
}

func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf("%7d ", w.now) + fmt.Sprintf(format, args...)
	if w.opts.Verbose || len(w.trace) < w.opts.TraceTail {
		w.trace = append(w.trace, line)
		return
	}
	w.trace[w.traceNext] = line
	w.traceNext = (w.traceNext + 1) % len(w.trace)
}

func (w *world) fail(format string, args ...any) {
	if w.failed == "" {
		w.failed = fmt.Sprintf(format, args...)
		w.tracef("VIOLATION: %s", w.failed)
	}
}

func (w *world) intn(n int) int { return w.rng.IntN(n) }

func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

// Run executes one simulation.
func Run(opts Options) *Result {
	if opts.Steps <= 0 {
		opts.Steps = 4000
	}
	if opts.TraceTail <= 0 {
		opts.TraceTail = 400
	}
	w := &world{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)), reqs: map[uint64]*producer{}}
	w.setup()
	steps := 0
	for ; steps < opts.Steps && w.failed == "" && len(w.queue) > 0; steps++ {
		w.step()
	}
	if w.failed == "" {
		w.settle()
	}
	res := &Result{Seed: opts.Seed, Steps: steps, Violation: w.failed, Stats: w.stats}
	if opts.Verbose || len(w.trace) < opts.TraceTail {
		res.Trace = w.trace
	} else {
		res.Trace = append(append([]string{}, w.trace[w.traceNext:]...), w.trace[:w.traceNext]...)
	}
	return res
}

func (w *world) step() {
	e := heap.Pop(&w.queue).(*event)
	w.now = e.at
	e.fn()
	if w.failed == "" {
		w.check.step()
	}
}

// settle heals every fault, restarts crashed brokers, stops the nemesis and
// runs on so the cluster converges; invariants keep being checked.
func (w *world) settle() {
	w.tracef("settle: heal all, restart all")
	w.net.healAll()
	w.net.dropP = 0
	w.nemesisOff = true
	for _, b := range w.brokers {
		if !b.alive {
			b.restart()
		}
	}
	end := w.now + settleMs
	for w.failed == "" && len(w.queue) > 0 && w.queue[0].at <= end {
		w.step()
	}
	if w.failed == "" {
		w.check.settled()
	}
}

// settleMs is how long the healed cluster runs before the end-of-run
// checks: every partition must have its whole replica set in the ISR by
// then.
const settleMs = 3000

// setup builds the cluster from the PRNG: 3-5 brokers, 1-3 partitions with
// replication factor 3 (or fewer brokers), a random min ISR, and unclean
// election enabled on some partitions.
func (w *world) setup() {
	nb := 3 + w.intn(3)
	np := 1 + w.intn(3)
	for p := 0; p < np; p++ {
		t := topic{name: fmt.Sprintf("p%d", p), minISR: 1 + w.intn(2), unclean: w.chance(0.2)}
		perm := w.rng.Perm(nb)
		for _, i := range perm[:min(3, nb)] {
			t.replicas = append(t.replicas, int32(i+1))
		}
		w.topics = append(w.topics, t)
	}
	w.net = newNetwork(w)
	w.ctrl = newController(w)
	w.check = newChecker(w)
	for i := 0; i < nb; i++ {
		b := newBroker(w, int32(i+1))
		w.brokers = append(w.brokers, b)
		b.start()
	}
	for p := range w.topics {
		w.tracef("topic %s replicas=%v min.insync=%d unclean=%v", w.topics[p].name, w.topics[p].replicas, w.topics[p].minISR, w.topics[p].unclean)
		w.addClients(p)
	}
	w.ctrl.start()
	w.at(200+int64(w.intn(200)), w.nemesis)
}
