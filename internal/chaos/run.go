// Package chaos is sluice's fault-injection harness: it runs a cluster of
// real `sluice serve` processes on loopback, a Jepsen-style queue workload
// (acks=all idempotent producers, assign-mode consumers, a final read of
// every partition), injects faults from a seeded schedule (SIGKILL,
// SIGSTOP, network isolation through TCP proxies, rolling SIGTERM
// restarts, late delivery of held requests), heals, and checks the history
// for Jepsen's queue anomalies. With Options.Workload WorkloadTxn the
// producers run Kafka transactions and the consumers read_committed, and
// CheckTxn adds the transactional anomalies (G1a aborted reads, uncommitted
// reads, torn transactions).
//
// cmd/sluice-chaos is the command; test/chaos runs a short schedule in CI.
// docs/chaos.md describes the faults, the checker and the limits.
package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Options configure a run. Zero values take the defaults noted.
type Options struct {
	Nodes    int           // 3 or 5 (default 3)
	Duration time.Duration // workload + fault window (default 60s)
	Seed     uint64
	Out      string // output directory (required)
	MinISR   int    // min.insync.replicas (default 2)
	Unclean  bool   // unclean.leader.election.enable
	Faults   []string
	// Workload is WorkloadQueue (default), WorkloadTxn, WorkloadGroup or
	// WorkloadShare.
	Workload string
	// TxnVersion is the transaction version the txn workload's producers
	// use: 0 lets franz-go negotiate (version 2, KIP-890 part 2, when the
	// brokers advertise the transaction.version feature), 1 caps the
	// request versions so they stay on version 1.
	TxnVersion int
	// Scenario is "" (random schedule of Faults), "none", or
	// "jepsen2013" (see FaultJepsen2013; needs 5 nodes).
	Scenario string
	// Overlap runs network faults (isolate, oneway, split) and process
	// and disk faults (kill, pause, term, slow-disk, disk-fail) as two
	// independent schedules at once, so a node can be killed while it is
	// cut off, a leader paused during a split, and so on.
	Overlap bool
	// Tiered runs the cluster with tiered storage (KIP-405): an S3 test
	// server (testproc.StartS3Server) behind an HTTP proxy (s3proxy.go)
	// is the brokers' object store, the topic has remote.storage.enable
	// with small segments and local retention, and FaultObjStore may be
	// scheduled.
	Tiered bool
	// Plan, if set, is the fault schedule to run instead of a generated
	// one (e.g. the "schedule" of a previous results.json).
	Plan []Fault
	// Binary is the sluice binary; empty builds ./cmd/sluice.
	Binary string
	// PortBase, if set, is the first of the 5 ports per node the run
	// listens on (each node's Kafka, controller and HTTP ports, then
	// the proxies); free ports are picked otherwise.
	PortBase int

	Partitions  int     // default 4
	Producers   int     // default 4
	Consumers   int     // default 2
	Rate        float64 // target sends per second over all producers (default 200)
	SendTimeout time.Duration
	// Recovery is how long the workload keeps running after the final
	// heal before the producers stop (default 5s).
	Recovery time.Duration
	// KeepData keeps the brokers' data directories (they are removed
	// after a run without anomalies otherwise).
	KeepData bool
	// Logf receives progress lines (default: discard).
	Logf func(format string, args ...any)
}

func (o *Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

func (o *Options) defaults() error {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Nodes < 3 || o.Nodes > 9 {
		return errors.New("chaos: --nodes must be between 3 and 9")
	}
	if o.Duration == 0 {
		o.Duration = 60 * time.Second
	}
	if o.MinISR == 0 {
		o.MinISR = 2
	}
	if o.Partitions == 0 {
		o.Partitions = 4
		if o.Workload == WorkloadShare {
			o.Partitions = 3
		}
	}
	if o.Producers == 0 {
		o.Producers = 4
	}
	if o.Consumers == 0 {
		o.Consumers = 2
	}
	if o.Rate == 0 {
		o.Rate = 200
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = 10 * time.Second
	}
	if o.Recovery == 0 {
		o.Recovery = 5 * time.Second
	}
	if o.Out == "" {
		return errors.New("chaos: Out (output directory) is required")
	}
	if o.Workload == "" {
		o.Workload = WorkloadQueue
	}
	if o.Workload != WorkloadQueue && o.Workload != WorkloadTxn && o.Workload != WorkloadGroup && o.Workload != WorkloadShare {
		return fmt.Errorf("chaos: unknown workload %q (queue, txn, group, share)", o.Workload)
	}
	if o.TxnVersion != 0 && o.TxnVersion != 1 {
		return errors.New("chaos: --txn-version must be 0 (negotiated) or 1")
	}
	if o.Scenario == FaultJepsen2013 && o.Nodes < 5 {
		return errors.New("chaos: scenario jepsen2013 needs --nodes 5: every node is a controller voter, so pausing both followers of a 3-node cluster also stops the metadata quorum and the ISR can never shrink to the leader")
	}
	if o.Scenario != "" && o.Scenario != FaultJepsen2013 && o.Scenario != "none" {
		return fmt.Errorf("chaos: unknown scenario %q (jepsen2013, none)", o.Scenario)
	}
	return nil
}

// Result is what a run found; it is written to results.json.
type Result struct {
	Config struct {
		Nodes       int      `json:"nodes"`
		DurationS   float64  `json:"durationS"`
		Seed        uint64   `json:"seed"`
		MinISR      int      `json:"minISR"`
		Unclean     bool     `json:"unclean"`
		Faults      []string `json:"faults"`
		Workload    string   `json:"workload,omitempty"`
		TxnVersion  int      `json:"txnVersion,omitempty"`
		Tiered      bool     `json:"tiered,omitempty"`
		Scenario    string   `json:"scenario,omitempty"`
		Partitions  int      `json:"partitions"`
		Producers   int      `json:"producers"`
		Consumers   int      `json:"consumers"`
		Rate        float64  `json:"rate"`
		Binary      string   `json:"binary"`
		ReplayFlags string   `json:"replayFlags"`
	} `json:"config"`
	Started  time.Time `json:"started"`
	ElapsedS float64   `json:"elapsedS"`
	// KafkaPlaneProxied: brokers advertise the proxies, so isolation also
	// cuts inter-broker replication (false: only controller links and the
	// harness's clients go through the proxies).
	KafkaPlaneProxied bool    `json:"kafkaPlaneProxied"`
	Schedule          []Fault `json:"schedule"`
	Timeline          []Event `json:"timeline"`
	Stats             Stats   `json:"stats"`
	// TxnStats counts the transactions (txn workload only).
	TxnStats *TxnStats `json:"txnStats,omitempty"`
	// GroupStats counts the group workload's membership changes.
	GroupStats *GroupStats `json:"groupStats,omitempty"`
	// ShareStats counts the share workload's members and deliveries.
	ShareStats *ShareStats `json:"shareStats,omitempty"`
	// ShareEnd is each share partition as the group's coordinator
	// describes it after the share workload's drain.
	ShareEnd map[int32]SharePartitionEnd `json:"shareEnd,omitempty"`
	Final    FinalRead                   `json:"finalRead"`
	// Tiered is where the partitions stand across the local and remote
	// tiers after the final read (tiered runs only).
	Tiered   *TieredState `json:"tiered,omitempty"`
	Analysis *Analysis    `json:"analysis"`
	// Valid is false when the run could not check what it set out to
	// (cluster never healthy, final read incomplete, ...); see Notes.
	Valid bool `json:"valid"`
	// Crashes lists brokers that exited without the harness asking: a
	// bug even when no anomaly is found.
	Crashes    []string       `json:"crashes,omitempty"`
	Notes      []string       `json:"notes,omitempty"`
	PollErrors map[string]int `json:"pollErrors,omitempty"`
	Series     []Bucket       `json:"series"`
	Logs       []string       `json:"logs"`
	// Proxies counts, per proxy, the connections accepted, held or frozen
	// by a cut, and those whose source process was not identified.
	Proxies []ProxyStats `json:"proxies"`
}

// ProxyStats describes one proxy.
type ProxyStats struct {
	Kind       string `json:"kind"`
	Node       int    `json:"node"`
	Addr       string `json:"addr"`
	Accepted   int64  `json:"accepted"`
	Frozen     int64  `json:"frozen"`
	UnknownSrc int64  `json:"unknownSrc"`
}

// Stats counts the history.
type Stats struct {
	Sends     int `json:"sends"`
	OK        int `json:"ok"`
	Fail      int `json:"fail"`
	Info      int `json:"info"`
	Reads     int `json:"reads"`
	FinalRead int `json:"finalReadRecords"`
	// FailErrs counts the errors of failed and indeterminate sends.
	FailErrs map[string]int `json:"failErrs,omitempty"`
}

// Anomalies is the total anomaly count.
func (r *Result) Anomalies() int {
	if r.Analysis == nil {
		return 0
	}
	return r.Analysis.Total()
}

// Run builds (or uses) the sluice binary, runs the cluster, workload and
// schedule, checks the history and writes results.json, history.jsonl and
// report.html into o.Out. The error is for harness failures; anomalies
// are in the Result.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	// A previous run's data would be recovered by the new cluster.
	os.RemoveAll(filepath.Join(out, "data"))
	os.RemoveAll(filepath.Join(out, "logs"))
	bin := o.Binary
	if bin == "" {
		o.logf("building ./cmd/sluice")
		if err := os.MkdirAll(filepath.Join(out, "bin"), 0o755); err != nil {
			return nil, err
		}
		if bin, err = BuildBinary(filepath.Join(out, "bin")); err != nil {
			return nil, err
		}
	}
	res := &Result{Started: time.Now()}
	cfg := &res.Config
	cfg.Nodes, cfg.DurationS, cfg.Seed, cfg.MinISR, cfg.Unclean = o.Nodes, o.Duration.Seconds(), o.Seed, o.MinISR, o.Unclean
	cfg.Faults, cfg.Scenario, cfg.Partitions, cfg.Producers, cfg.Consumers, cfg.Rate, cfg.Binary = o.Faults, o.Scenario, o.Partitions, o.Producers, o.Consumers, o.Rate, bin
	cfg.Workload, cfg.TxnVersion, cfg.Tiered = o.Workload, o.TxnVersion, o.Tiered
	cfg.ReplayFlags = replayFlags(&o)
	res.Schedule = Schedule(&o)
	for _, f := range res.Schedule {
		o.logf("schedule: %s", f)
	}

	// Bound the whole run.
	ctx, cancel := context.WithTimeout(ctx, o.Duration+5*time.Minute)
	defer cancel()

	c, err := newCluster(&o, bin, out)
	if err != nil {
		return nil, err
	}
	removeData := false
	defer func() {
		c.close()
		if removeData {
			os.RemoveAll(filepath.Join(out, "data"))
		}
	}()
	// Disk faults need the broker's fault-injection FS (it also turns
	// sendfile off, so it is on only when the schedule uses it).
	if slices.ContainsFunc(res.Schedule, func(f Fault) bool { return diskFault(f.Kind) }) {
		for _, n := range c.nodes {
			n.p.Env = append(n.p.Env, "SLUICE_FAULT_INJECTION=1")
		}
	}
	for _, n := range c.nodes {
		res.Logs = append(res.Logs, n.p.LogPath)
	}
	o.logf("starting %d nodes", o.Nodes)
	if err := c.start(ctx); err != nil {
		return nil, fmt.Errorf("starting the cluster: %w (logs in %s)", err, filepath.Join(out, "logs"))
	}
	res.KafkaPlaneProxied = c.kafkaPlaneProxied
	if !c.kafkaPlaneProxied {
		res.Notes = append(res.Notes, "brokers advertise their real Kafka ports: isolation cuts controller (Raft, heartbeat, AlterPartition) links and the harness's clients, not inter-broker replication fetches")
	}
	adm, acl, err := c.admin()
	if err != nil {
		return nil, err
	}
	defer acl.Close()
	const topic = "chaos"
	rf := int16(min(3, o.Nodes))
	minISR, unclean := fmt.Sprint(o.MinISR), fmt.Sprint(o.Unclean)
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		configs := map[string]*string{"min.insync.replicas": &minISR, "unclean.leader.election.enable": &unclean}
		if o.Tiered {
			for k, v := range tieredTopicConfigs {
				configs[k] = &v
			}
		}
		r, err := adm.CreateTopic(cctx, int32(o.Partitions), rf, configs, topic)
		ccancel()
		if err == nil && r.Err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("creating topic: %v %v", err, r.Err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := c.waitHealthy(ctx, adm, topic, 30*time.Second); err != nil {
		return nil, fmt.Errorf("topic never healthy: %w", err)
	}
	o.logf("cluster up (kafka plane proxied: %v); workload for %v", c.kafkaPlaneProxied, o.Duration)

	h := &history{t0: time.Now()}
	w := &workload{c: c, o: &o, topic: topic, h: h}
	var pwg, cwg sync.WaitGroup
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	var gw *groupWorkload
	var sw *shareWorkload
	switch o.Workload {
	case WorkloadGroup:
		gw = &groupWorkload{w: w, gh: &groupHistory{}}
		gw.run(wctx, max(4, 2*o.Consumers), &cwg)
		gw.watchCommits(wctx, adm, &cwg)
	case WorkloadShare:
		sw = &shareWorkload{w: w, sh: &shareHistory{}}
		if err := sw.setGroupConfigs(ctx, acl, c.ids()); err != nil {
			return nil, err
		}
		sw.run(wctx, max(3, o.Consumers))
	default:
		for i := range o.Consumers {
			w.consumer(wctx, i, &cwg)
		}
	}
	for i := range o.Producers {
		produce := w.producer
		if o.Workload == WorkloadTxn {
			produce = w.txnProducer
		}
		if err := produce(wctx, i, o.Rate/float64(o.Producers), &pwg); err != nil {
			return nil, err
		}
	}
	nm := &nemesis{c: c, adm: adm, topic: topic, h: h, logf: o.logf}
	nctx, ncancel := context.WithTimeout(ctx, o.Duration)
	nm.run(nctx, res.Schedule)
	<-nctx.Done()
	ncancel()
	healStart := h.since()
	errs := c.healAll()
	nm.add(Event{StartMs: healStart, EndMs: h.since(), Kind: "heal", Detail: "final heal: resume, restart, reconnect everything", Err: errStr(errs...)})
	o.logf("healed; recovery %v", o.Recovery)
	sleepCtx(ctx, o.Recovery)
	w.stop.Store(true)
	if !waitTimeout(&pwg, o.SendTimeout+15*time.Second) {
		res.Notes = append(res.Notes, "producers did not stop in time")
		wcancel()
		waitTimeout(&pwg, 10*time.Second)
	}
	waitTimeout(&cwg, 10*time.Second)
	if sw != nil {
		// The members accept everything until every acknowledged send
		// is complete.
		o.logf("share drain")
		ends, _, err := w.listEnds(ctx, adm)
		m := map[int32]int64{}
		if err != nil {
			res.Notes = append(res.Notes, "share drain: list offsets: "+err.Error())
		} else {
			ends.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
		}
		// Complete by the deliveries, and as the group's coordinator
		// describes the share partitions (the indeterminate sends that
		// were written too).
		if err := sw.drainUntil(ctx, 120*time.Second, func() (bool, string) {
			if ok, why := sw.complete(h); !ok {
				return ok, why
			}
			return endComplete(sw.describeEnd(ctx, acl, m))
		}); err != nil {
			res.Notes = append(res.Notes, "share drain: "+err.Error())
		}
		if len(m) > 0 {
			res.ShareEnd = sw.describeEnd(ctx, acl, m)
			for p, e := range res.ShareEnd {
				if e.Err != "" {
					res.Notes = append(res.Notes, fmt.Sprintf("share drain: partition %d not described: %s", p, e.Err))
				}
			}
		}
	}
	if gw != nil {
		// The members still running drain the topic; committed offsets
		// must reach the high watermarks.
		ends, _, err := w.listEnds(ctx, adm)
		if err != nil {
			res.Notes = append(res.Notes, "group drain: list offsets: "+err.Error())
		} else {
			m := map[int32]int64{}
			ends.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
			o.logf("group drain")
			if err := gw.drain(ctx, adm, m, 60*time.Second); err != nil {
				res.Notes = append(res.Notes, "group drain: "+err.Error())
			}
		}
	}
	wcancel()

	res.Valid = true
	if err := c.waitHealthy(ctx, adm, topic, 45*time.Second); err != nil {
		files := c.snapshotStatus(out, "unhealthy")
		res.Notes = append(res.Notes, fmt.Sprintf("cluster not healthy 45s after the final heal and the end of the workload: %v (every node's view: %v)", err, files))
	}
	o.logf("final read")
	res.Final = w.finalRead(ctx, adm, 60*time.Second)
	if res.Final.Err != "" {
		res.Valid = false
		res.Notes = append(res.Notes, "final read: "+res.Final.Err)
	}
	if o.Tiered {
		res.Tiered = c.tieredState(ctx, adm, topic)
		o.logf("%s", res.Tiered.summary())
		if res.Tiered.Err != "" {
			res.Notes = append(res.Notes, "tiered state: "+res.Tiered.Err)
		} else if len(res.Tiered.ReadFromRemote) == 0 {
			res.Notes = append(res.Notes, "tiered run did not tier: no partition's log start is below its local log start, so the final read did not go through the remote log")
		}
	}
	res.Timeline = nm.events()

	h.mu.Lock()
	sends, reads, txns := h.sends, h.reads, h.txns
	res.PollErrors = h.pollErrs
	h.mu.Unlock()
	if o.Workload == WorkloadTxn {
		sort.SliceStable(txns, func(i, j int) bool { return txns[i].StartMs < txns[j].StartMs })
		res.Analysis = CheckTxn(txns, reads, res.Final)
		ts := txnStats(txns)
		res.TxnStats = &ts
		sends = txnSends(txns)
	} else {
		sort.SliceStable(sends, func(i, j int) bool { return sends[i].StartMs < sends[j].StartMs })
		res.Analysis = Check(sends, reads, res.Final)
	}
	if gw != nil {
		gw.gh.mu.Lock()
		events, gs := gw.gh.events, gw.gh.stats
		gw.gh.mu.Unlock()
		sort.SliceStable(events, func(i, j int) bool { return events[i].AtMs < events[j].AtMs })
		for _, e := range events {
			if e.Kind == "consumed" {
				gs.Consumed += len(e.Values)
			}
		}
		CheckGroup(res.Analysis, events, sends)
		res.GroupStats = &gs
		if err := writeJSONL(filepath.Join(out, "group-history.jsonl"), events); err != nil {
			return res, err
		}
	}
	if sw != nil {
		sw.sh.mu.Lock()
		dels, ss := sw.sh.dels, sw.sh.stats
		sw.sh.mu.Unlock()
		sort.SliceStable(dels, func(i, j int) bool { return dels[i].AtMs < dels[j].AtMs })
		ss.count(dels)
		CheckShare(res.Analysis, dels, sends, shareDeliveryMax, shareLockMs)
		CheckShareEnd(res.Analysis, res.ShareEnd)
		res.ShareStats = &ss
		if err := writeJSONL(filepath.Join(out, "share-history.jsonl"), dels); err != nil {
			return res, err
		}
	}
	res.Stats = stats(sends, reads)
	if res.Stats.OK == 0 {
		res.Valid = false
		res.Notes = append(res.Notes, "no send was acknowledged")
	}
	res.Series = series(sends, o.Duration+o.Recovery+o.SendTimeout)
	res.ElapsedS = time.Since(res.Started).Seconds()
	for _, p := range append(append([]*proxy(nil), c.kprox...), c.cprox...) {
		res.Proxies = append(res.Proxies, ProxyStats{Kind: p.kind, Node: p.dst, Addr: p.addr(), Accepted: p.accepted.Load(), Frozen: p.frozenTotal.Load(), UnknownSrc: p.unknownSrc.Load()})
	}
	if c.s3p != nil {
		res.Proxies = append(res.Proxies, c.s3p.stats())
	}

	for _, n := range c.nodes {
		res.Crashes = append(res.Crashes, n.crashList()...)
	}
	if err := writeHistory(filepath.Join(out, "history.jsonl"), sends, reads, txns); err != nil {
		return res, err
	}
	if err := writeJSON(filepath.Join(out, "results.json"), res); err != nil {
		return res, err
	}
	if err := writeHTML(filepath.Join(out, "report.html"), res); err != nil {
		return res, err
	}
	o.logf("sends ok=%d fail=%d info=%d reads=%d anomalies=%d valid=%v", res.Stats.OK, res.Stats.Fail, res.Stats.Info, res.Stats.Reads, res.Anomalies(), res.Valid)
	if gs := res.GroupStats; gs != nil {
		o.logf("group: %d joins (%d KIP-848, %d classic), %d leaves, %d crashes, %d type changes, %d records consumed, %d commit observations",
			gs.Joins, gs.KIP848, gs.Classic, gs.Leaves, gs.Crashes, gs.TypeChanges, gs.Consumed, gs.Committed)
	}
	if ss := res.ShareStats; ss != nil {
		o.logf("share: %d members (%d crashes, %d leaves, %d stalls), %d deliveries (%d redelivered), acks %v, results %v",
			ss.Members, ss.Crashes, ss.Leaves, ss.Stalls, ss.Deliveries, ss.Redelivered, ss.Acks, ss.Results)
	}
	if ts := res.TxnStats; ts != nil {
		o.logf("transactions %d: committed %d, aborted %d (%d on purpose), indeterminate %d", ts.Txns, ts.Committed, ts.Aborted, ts.AbortIntended, ts.Info)
	}
	c.snapshotStatus(out, "end")
	removeData = res.Anomalies() == 0 && res.Valid && len(res.Notes) == 0 && len(res.Crashes) == 0 && !o.KeepData
	return res, nil
}

func replayFlags(o *Options) string {
	s := fmt.Sprintf("--nodes %d --duration %v --seed %d --min-isr %d --unclean=%v", o.Nodes, o.Duration, o.Seed, o.MinISR, o.Unclean)
	if o.Scenario != "" {
		s += " --scenario " + o.Scenario
	} else {
		f := ""
		for i, k := range o.Faults {
			if i > 0 {
				f += ","
			}
			f += k
		}
		s += " --faults " + f
		if o.Overlap {
			s += " --overlap"
		}
	}
	if o.Tiered {
		s += " --tiered"
	}
	if o.Workload == WorkloadGroup || o.Workload == WorkloadShare {
		s += " --workload " + o.Workload
	}
	if o.Workload == WorkloadTxn {
		s += " --workload txn"
		if o.TxnVersion != 0 {
			s += fmt.Sprintf(" --txn-version %d", o.TxnVersion)
		}
	}
	return s + fmt.Sprintf(" --partitions %d --producers %d --consumers %d --rate %g", o.Partitions, o.Producers, o.Consumers, o.Rate)
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func stats(sends []Send, reads []Read) Stats {
	s := Stats{Sends: len(sends), FailErrs: map[string]int{}}
	for _, x := range sends {
		switch x.Outcome {
		case "ok":
			s.OK++
		case "fail":
			s.Fail++
		default:
			s.Info++
		}
		if x.Err != "" {
			e := x.Err
			if len(e) > 100 {
				e = e[:100]
			}
			s.FailErrs[x.Outcome+": "+e]++
		}
	}
	for _, r := range reads {
		if r.Consumer == "final" {
			s.FinalRead++
		} else {
			s.Reads++
		}
	}
	if len(s.FailErrs) == 0 {
		s.FailErrs = nil
	}
	return s
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeHistory writes one JSON line per send (for the txn workload, per
// value of a transaction, with the transaction's outcome), per
// transaction, and per record read.
func writeHistory(path string, sends []Send, reads []Read, txns []Txn) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, s := range sends {
		enc.Encode(struct {
			Type string `json:"type"`
			Send
		}{"send", s})
	}
	for _, t := range txns {
		enc.Encode(struct {
			Type string `json:"type"`
			Txn
		}{"txn", t})
	}
	for _, r := range reads {
		enc.Encode(struct {
			Type string `json:"type"`
			Read
		}{"read", r})
	}
	return f.Close()
}
