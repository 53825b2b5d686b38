package chaos

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Fault kinds.
const (
	FaultKill    = "kill"    // SIGKILL a node, restart it after Dur
	FaultPause   = "pause"   // SIGSTOP a node, SIGCONT after Dur
	FaultIsolate = "isolate" // cut a node from every other node and the clients for Dur
	FaultTerm    = "term"    // controlled restart (SIGTERM) of every node in turn
	// FaultOneWay drops, for Dur, either everything a node sends to the
	// other nodes and the clients ("outbound", even Partition) or
	// everything they send to it ("inbound", odd Partition): the node
	// still hears (or is still heard), and acts on requests whose answers
	// are lost.
	FaultOneWay = "oneway"
	// FaultSplit partitions the nodes into a minority (the node, and on 5
	// or more nodes the next one too) and the majority, both ways, for
	// Dur; clients still reach every node.
	FaultSplit = "split"
	// FaultSlowDisk makes every write and fsync of a node sleep (50-300 ms)
	// for Dur, through the broker's fault-injection FS.
	FaultSlowDisk = "slow-disk"
	// FaultDiskFail makes a node's writes and fsyncs fail: the broker
	// halts as Kafka does when its last log dir fails; it is restarted
	// after Dur on the same data.
	FaultDiskFail = "disk-fail"
	// FaultDelayTxn holds one client connection's request for a few
	// seconds at the proxy, then delivers it (the KAFKA-17754 class: a
	// request arriving after its transaction ended). Even Partition: the
	// first Produce sent to the target node; odd: the first EndTxn sent
	// to any node (the transaction coordinator). The hold is DurMs plus
	// 2 s (4-7 s), around the txn producers' produce request timeout of
	// about 6 s, so the client sometimes retries or gives up on the
	// request before it lands.
	FaultDelayTxn = "delay-txn"
	// FaultJepsen2013 is the 2013 Jepsen Kafka sequence on one partition:
	// pause both followers (the leader shrinks the ISR to itself and, with
	// min.insync.replicas=1, keeps acknowledging), kill the leader, resume
	// the followers (an unclean election picks one of them), restart the
	// old leader (it truncates to the new leader's log).
	FaultJepsen2013 = "jepsen2013"
	// FaultObjStore troubles tiered storage's object store for Dur
	// through the HTTP proxy in front of the S3 server (s3proxy.go):
	// Partition%3 == 0 slow (every request waits 200-1000 ms), 1 errors
	// (every request answered 500 or 503), 2 outage (requests held
	// unanswered, then cut). Only in runs with Options.Tiered; a random
	// schedule of other runs leaves it out.
	FaultObjStore = "objstore"
)

// AllFaults are the kinds a random schedule may use.
var AllFaults = []string{FaultKill, FaultPause, FaultIsolate, FaultTerm, FaultOneWay, FaultSplit, FaultSlowDisk, FaultDiskFail, FaultDelayTxn, FaultObjStore}

// objStoreMode is a FaultObjStore's mode (s3Slow, s3Errors, s3Outage)
// and, slow, its per-request delay, derived from the fault so schedules
// need no extra random draws.
func objStoreMode(f Fault) (int, time.Duration) {
	mode := s3Slow + f.Partition%3
	return mode, durMs(200 + f.DurMs%801)
}

// scheduledKinds are the kinds of o.Faults a random schedule draws from:
// FaultObjStore only in a tiered run.
func scheduledKinds(o *Options) []string {
	if o.Tiered {
		return o.Faults
	}
	return slices.DeleteFunc(slices.Clone(o.Faults), func(k string) bool { return k == FaultObjStore })
}

// delayHold is how long a FaultDelayTxn holds its request.
func delayHold(f Fault) time.Duration { return durMs(f.DurMs + 2000) }

// diskFault reports whether kind needs the broker's fault-injection FS.
func diskFault(kind string) bool { return kind == FaultSlowDisk || kind == FaultDiskFail }

// slowDiskDelay is the per-operation delay of a FaultSlowDisk, derived
// from its duration so schedules need no extra random draws.
func slowDiskDelay(f Fault) time.Duration { return durMs(50 + f.DurMs%251) }

// splitMinority is the minority side of a FaultSplit on node in a cluster
// of n nodes.
func splitMinority(node, n int) []int {
	if n >= 5 {
		return []int{node, node%n + 1}
	}
	return []int{node}
}

// Fault is one planned fault. A schedule is fully determined by the seed
// and the options; which node "the leader of partition k" is gets resolved
// when the fault starts (recorded in the timeline), falling back to Node
// if the leader is unknown.
type Fault struct {
	// AtMs is the planned start, in ms after the workload started. A
	// fault never starts before the previous one healed.
	AtMs int64  `json:"atMs"`
	Kind string `json:"kind"`
	// Target is "node" (Node) or "leader" (leader of Partition).
	Target    string `json:"target,omitempty"`
	Node      int    `json:"node,omitempty"`
	Partition int    `json:"partition,omitempty"`
	// DurMs is how long the fault lasts before it is healed.
	DurMs int64 `json:"durMs,omitempty"`
	// Lane is the fault's lane: faults of one lane run one after the
	// other, lanes run at once (Options.Overlap: lane 1 holds the
	// network faults, lane 0 everything else).
	Lane int `json:"lane,omitempty"`
}

// netFault reports whether kind only changes network rules (the proxies).
func netFault(kind string) bool {
	return kind == FaultIsolate || kind == FaultOneWay || kind == FaultSplit || kind == FaultDelayTxn || kind == FaultObjStore
}

func (f Fault) String() string { return f.describe() + laneSuffix(f) }

func (f Fault) describe() string {
	tgt := fmt.Sprintf("node %d", f.Node)
	if f.Target == "leader" {
		tgt = fmt.Sprintf("leader of p%d (else node %d)", f.Partition, f.Node)
	}
	switch f.Kind {
	case FaultTerm:
		return fmt.Sprintf("@%.1fs term: rolling controlled restart of every node", float64(f.AtMs)/1000)
	case FaultJepsen2013:
		return fmt.Sprintf("@%.1fs jepsen2013 on p%d", float64(f.AtMs)/1000, f.Partition)
	case FaultOneWay:
		dir := "outbound"
		if f.Partition%2 == 1 {
			dir = "inbound"
		}
		return fmt.Sprintf("@%.1fs oneway (%s) %s for %.1fs", float64(f.AtMs)/1000, dir, tgt, float64(f.DurMs)/1000)
	case FaultDelayTxn:
		if f.Partition%2 == 1 {
			return fmt.Sprintf("@%.1fs delay-txn: hold the first EndTxn to any node for %v", float64(f.AtMs)/1000, delayHold(f))
		}
		return fmt.Sprintf("@%.1fs delay-txn: hold the first Produce to %s for %v", float64(f.AtMs)/1000, tgt, delayHold(f))
	case FaultSlowDisk:
		return fmt.Sprintf("@%.1fs slow-disk (%v per op) %s for %.1fs", float64(f.AtMs)/1000, slowDiskDelay(f), tgt, float64(f.DurMs)/1000)
	case FaultObjStore:
		mode, delay := objStoreMode(f)
		what := s3ModeNames[mode]
		if mode == s3Slow {
			what = fmt.Sprintf("slow (%v per request)", delay)
		}
		return fmt.Sprintf("@%.1fs objstore %s for %.1fs", float64(f.AtMs)/1000, what, float64(f.DurMs)/1000)
	}
	return fmt.Sprintf("@%.1fs %s %s for %.1fs", float64(f.AtMs)/1000, f.Kind, tgt, float64(f.DurMs)/1000)
}

// ParseFaults parses a comma-separated fault list; "partition" is an alias
// of "isolate", "all" is every kind.
func ParseFaults(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ToLower(f))
		switch f {
		case "":
			continue
		case "all":
			for _, k := range AllFaults {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
			continue
		case "partition":
			f = FaultIsolate
		case FaultKill, FaultPause, FaultIsolate, FaultTerm, FaultOneWay, FaultSplit, FaultSlowDisk, FaultDiskFail, FaultDelayTxn, FaultObjStore:
		default:
			return nil, fmt.Errorf("unknown fault %q (kill, pause, partition|isolate, term, oneway, split, slow-disk, disk-fail, delay-txn, objstore, all)", f)
		}
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out, nil
}

// Schedule builds the fault schedule for the options: Plan if set, the named scenario,
// or a seeded random schedule of the enabled faults, one every 5-10 s
// after a 5 s warm-up, each healed after 2-6 s.
func Schedule(o *Options) []Fault {
	if len(o.Plan) > 0 {
		return o.Plan
	}
	switch o.Scenario {
	case FaultJepsen2013:
		return jepsen2013Schedule(o)
	case "none":
		return nil
	}
	kinds := scheduledKinds(o)
	if len(kinds) == 0 {
		return nil
	}
	if !o.Overlap {
		return randomLane(o, kinds, 0)
	}
	var procs, nets []string
	for _, k := range kinds {
		if netFault(k) {
			nets = append(nets, k)
		} else {
			procs = append(procs, k)
		}
	}
	out := append(randomLane(o, procs, 0), randomLane(o, nets, 1)...)
	slices.SortStableFunc(out, func(a, b Fault) int { return cmp.Compare(a.AtMs, b.AtMs) })
	return out
}

// randomLane draws one lane's faults from kinds: one every 5-10 s after a 5
// s warm-up, each healed after 2-5 s (isolations and splits 1 s more).
// Lane 0 uses the same stream as before lanes existed, so a seed without
// Overlap gives the same schedule as earlier versions.
func randomLane(o *Options, kinds []string, lane int) []Fault {
	if len(kinds) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5c4ed+uint64(lane)))
	dur := o.Duration.Milliseconds()
	var out []Fault
	t := int64(5000)
	if lane > 0 {
		t += 2500 // lanes start apart
	}
	for t < dur-3000 {
		// Draw every number for every fault so the stream stays aligned.
		kind := kinds[rng.IntN(len(kinds))]
		d := 2000 + rng.Int64N(3001)
		leader := rng.IntN(2) == 0
		f := Fault{AtMs: t, Kind: kind, Node: 1 + rng.IntN(o.Nodes), Partition: rng.IntN(o.Partitions), Target: "node", DurMs: d, Lane: lane}
		gap := 5000 + rng.Int64N(5001)
		switch kind {
		case FaultIsolate, FaultOneWay, FaultSplit:
			f.DurMs += 1000
		case FaultTerm:
			f.DurMs, f.Target, f.Node, f.Partition = 0, "", 0, 0
		}
		if leader && f.Target == "node" {
			f.Target = "leader"
		}
		out = append(out, f)
		t += max(gap, f.DurMs+2000)
	}
	return out
}

// jepsen2013Schedule runs the 2013 sequence on partition 0, and again on
// partition 1 if the run is long enough.
func jepsen2013Schedule(o *Options) []Fault {
	var out []Fault
	for i, at := 0, int64(6000); at+20000 <= o.Duration.Milliseconds() || i == 0; i, at = i+1, at+25000 {
		out = append(out, Fault{AtMs: at, Kind: FaultJepsen2013, Target: "leader", Partition: i % o.Partitions, Node: 1})
	}
	return out
}

func laneSuffix(f Fault) string {
	if f.Lane == 0 {
		return ""
	}
	return fmt.Sprintf(" (lane %d)", f.Lane)
}

// durMs is a helper for time.Duration from ms.
func durMs(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
