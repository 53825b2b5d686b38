// Command sluice-chaos runs a fault-injection test against a cluster of
// real sluice processes on loopback and checks the history for Jepsen's
// queue anomalies. See docs/chaos.md.
//
//	go run ./cmd/sluice-chaos --nodes 3 --duration 60s --seed 1 --out /tmp/chaos
//	go run ./cmd/sluice-chaos --scenario jepsen2013 --min-isr 1 --unclean=true --out /tmp/j13
//	go run ./cmd/sluice-chaos --workload txn --nodes 3 --duration 10m --faults all --seed 1
//	go run ./cmd/sluice-chaos --workload share --duration 10m --faults all --seed 1
//
// Exit status: 0 no anomaly, 1 anomalies found (or a broker crashed), 2
// harness error or a run that could not check everything (e.g. the final
// read did not complete).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/chaos"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("sluice-chaos", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "cluster size (3 or 5; every node is a controller voter)")
	duration := fs.Duration("duration", 60*time.Second, "workload and fault window (healing, recovery and the final read come after)")
	seed := fs.Uint64("seed", 0, "schedule seed (0: time-based, printed)")
	out := fs.String("out", "", "output directory (results.json, report.html, history.jsonl, logs/)")
	minISR := fs.Int("min-isr", 2, "min.insync.replicas of the topic and the brokers")
	unclean := fs.Bool("unclean", false, "unclean.leader.election.enable")
	workload := fs.String("workload", chaos.WorkloadQueue, "queue (idempotent single sends), txn (transactions of 1-4 sends, 20% aborted, read_committed consumers) group (the queue's sends consumed by a churning consumer group of KIP-848 and classic members) or share (the queue's sends consumed by a share group whose members accept, release and reject, stall past their locks, crash and leave)")
	txnVersion := fs.Int("txn-version", 0, "txn workload: 0 lets the client negotiate the transaction version (2 when the brokers advertise it), 1 keeps it on version 1")
	faults := fs.String("faults", "kill,pause,partition,term", "faults of the random schedule: kill, pause, partition (isolate), term, oneway, split, slow-disk, disk-fail, delay-txn, objstore (needs --tiered), all")
	tiered := fs.Bool("tiered", false, "tiered storage: an S3 test server behind an HTTP proxy is the brokers' object store, the topic has remote.storage.enable with small segments, and the objstore fault (slow, 5xx, outage) may be scheduled")
	overlap := fs.Bool("overlap", false, "run network faults (isolate, oneway, split) and process/disk faults (kill, pause, term, slow-disk, disk-fail) as two schedules at once")
	scenario := fs.String("scenario", "", "named schedule instead of a random one: jepsen2013 (needs 5 nodes; default --nodes becomes 5), none")
	binary := fs.String("binary", "", "sluice binary (default: go build ./cmd/sluice)")
	partitions := fs.Int("partitions", 4, "partitions of the test topic (RF 3; the share workload's default is 3)")
	producers := fs.Int("producers", 4, "producer clients (2 concurrent synchronous senders each)")
	consumers := fs.Int("consumers", 2, "assign-mode consumer clients (the share workload: share group members, at least 3)")
	rate := fs.Float64("rate", 200, "target sends per second, all producers together")
	portBase := fs.Int("port-base", 0, "first of 5 consecutive ports per node to listen on (0: free ports anywhere)")
	keep := fs.Bool("keep-data", false, "keep the brokers' data directories after a clean run")
	schedFile := fs.String("schedule", "", "run the fault schedule in this JSON file (a results.json, or a list of faults) instead of generating one")
	render := fs.String("render", "", "only write DIR/report.html again from DIR/results.json, and exit")
	printSched := fs.Bool("print-schedule", false, "print the schedule for these flags and exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *render != "" {
		if err := chaos.RenderReport(*render); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		return 0
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *scenario == chaos.FaultJepsen2013 && !set["nodes"] {
		*nodes = 5
	}
	if *workload == chaos.WorkloadShare && !set["partitions"] {
		*partitions = 3
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano() % 1_000_000)
	}
	fl, err := chaos.ParseFaults(*faults)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if !*tiered && slices.Contains(strings.Split(strings.ReplaceAll(*faults, " ", ""), ","), chaos.FaultObjStore) {
		fmt.Fprintln(os.Stderr, "the objstore fault needs --tiered")
		return 2
	}
	if *out == "" && !*printSched {
		*out = filepath.Join(os.TempDir(), fmt.Sprintf("sluice-chaos-%d", *seed))
	}
	o := chaos.Options{
		Nodes: *nodes, Duration: *duration, Seed: *seed, Out: *out, MinISR: *minISR, Unclean: *unclean,
		Faults: fl, Workload: *workload, TxnVersion: *txnVersion, Scenario: *scenario, Binary: *binary, Partitions: *partitions, Producers: *producers,
		Consumers: *consumers, Rate: *rate, KeepData: *keep, Overlap: *overlap, Tiered: *tiered, PortBase: *portBase,
		Logf: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		},
	}
	if *schedFile != "" {
		plan, err := loadSchedule(*schedFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		o.Plan = plan
	}
	if *printSched {
		for _, f := range chaos.Schedule(&o) {
			fmt.Println(f)
		}
		return 0
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	fmt.Fprintf(os.Stderr, "sluice-chaos: seed %d, output %s\n", *seed, *out)
	res, err := chaos.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sluice-chaos: %v\n", err)
		return 2
	}
	fmt.Printf("seed %d: %d nodes, %v, min ISR %d, unclean %v, %s\n", *seed, o.Nodes, o.Duration, o.MinISR, o.Unclean, res.Config.ReplayFlags)
	fmt.Printf("sends ok=%d fail=%d info=%d, polled=%d, final read=%d, faults=%d\n", res.Stats.OK, res.Stats.Fail, res.Stats.Info, res.Stats.Reads, res.Stats.FinalRead, len(res.Timeline))
	if ts := res.TxnStats; ts != nil {
		fmt.Printf("transactions %d: committed %d, aborted %d (%d on purpose, %d after errors), indeterminate %d; %d values; %d reads in transactions (%d write-read dependencies)\n",
			ts.Txns, ts.Committed, ts.Aborted, ts.AbortIntended, ts.Aborted-ts.AbortIntended, ts.Info, ts.Values, ts.Reads, ts.ReadDeps)
	}
	if ss := res.ShareStats; ss != nil {
		fmt.Printf("share group: %d members (%d crashes, %d leaves, %d stalls past the lock), %d deliveries (%d redelivered), acks %v, results %v\n",
			ss.Members, ss.Crashes, ss.Leaves, ss.Stalls, ss.Deliveries, ss.Redelivered, ss.Acks, ss.Results)
	}
	for _, k := range res.Analysis.Kinds() {
		fmt.Printf("  %-21s %d\n", k, res.Analysis.Counts[k])
		for i, e := range res.Analysis.Examples[k] {
			if i >= 3 {
				break
			}
			fmt.Printf("      %s\n", e)
		}
	}
	for _, n := range res.Notes {
		fmt.Printf("note: %s\n", n)
	}
	for _, n := range res.Crashes {
		fmt.Printf("crash: %s\n", n)
	}
	fmt.Printf("report: %s\n", filepath.Join(*out, "report.html"))
	switch {
	case res.Anomalies() > 0:
		fmt.Printf("FAIL: %d anomalies\n", res.Anomalies())
		return 1
	case len(res.Crashes) > 0:
		fmt.Printf("FAIL: %d broker crashes\n", len(res.Crashes))
		return 1
	case !res.Valid:
		fmt.Println("UNKNOWN: the run could not check everything")
		return 2
	}
	fmt.Println("PASS")
	return 0
}

// loadSchedule reads a fault list, or the "schedule" of a results.json.
func loadSchedule(path string) ([]chaos.Fault, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var plan []chaos.Fault
	if err := json.Unmarshal(b, &plan); err == nil {
		return plan, nil
	}
	var res struct {
		Schedule []chaos.Fault `json:"schedule"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: neither a fault list nor a results.json: %v", path, err)
	}
	return res.Schedule, nil
}
