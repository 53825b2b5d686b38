package chaos

import (
	"fmt"
	"sort"
)

// Anomaly names, after Jepsen's queue checker (jepsen.tests.kafka).
const (
	// AnomLostWrite: an acknowledged send at offset o of partition p, and
	// either (a) no read ever returned its value although some read of p
	// returned an offset above o (Jepsen's definition), or (b) the final
	// read of p (start to high watermark after healing) passed o and did
	// not contain the value: the write is gone from the committed log.
	AnomLostWrite = "lost-write"
	// AnomInconsistentOffsets: one (partition, offset) observed with two
	// different values (by reads or acknowledgements).
	AnomInconsistentOffsets = "inconsistent-offsets"
	// AnomDuplicate: one value observed at two different offsets.
	AnomDuplicate = "duplicate"
	// AnomG1a: a send that failed definitely was read (aborted read).
	AnomG1a = "G1a"
	// AnomPollSkip: within one consumer session a partition's offsets
	// jumped over an offset known to exist.
	AnomPollSkip = "poll-skip"
	// AnomNonmonotonicPoll: within one consumer session a partition's
	// offsets did not increase.
	AnomNonmonotonicPoll = "nonmonotonic-poll"
	// AnomUnseen: acknowledged, not lost by the definitions above, but
	// never read by the end of the test (the final read should see
	// everything).
	AnomUnseen = "unseen"
)

// AnomalyNames lists every anomaly in report order.
var AnomalyNames = []string{AnomLostWrite, AnomInconsistentOffsets, AnomDuplicate, AnomG1a, AnomPollSkip, AnomNonmonotonicPoll, AnomUnseen}

// maxExamples bounds the examples kept per anomaly.
const maxExamples = 8

// Analysis is the checker's output.
type Analysis struct {
	Counts   map[string]int      `json:"counts"`
	Examples map[string][]string `json:"examples"`
	// Per-partition loss summary: acknowledged sends lost, by partition.
	LostByPartition map[int32]int `json:"lostByPartition,omitempty"`
	// Names lists the anomalies checked, in report order (empty:
	// AnomalyNames, the queue workload's).
	Names []string `json:"names,omitempty"`
}

// Kinds is the list of anomalies the analysis checked, in report order.
func (a *Analysis) Kinds() []string {
	if len(a.Names) > 0 {
		return a.Names
	}
	return AnomalyNames
}

// Total is the number of anomalies of every kind.
func (a *Analysis) Total() int {
	n := 0
	for _, c := range a.Counts {
		n += c
	}
	return n
}

func (a *Analysis) add(kind string, format string, args ...any) {
	a.Counts[kind]++
	if len(a.Examples[kind]) < maxExamples {
		a.Examples[kind] = append(a.Examples[kind], fmt.Sprintf(format, args...))
	}
}

type pos struct {
	p   int32
	off int64
}

// Check analyses a history: sends with their outcomes, every record read
// (consumer sessions and the final read), and the final read's bounds.
func Check(sends []Send, reads []Read, fr FinalRead) *Analysis {
	return check(sends, reads, fr, false)
}

// check is Check; with txn, the offsets of values that failed definitely
// (aborted transactions) are not known to exist for poll-skip even when
// read: a read_committed consumer must jump over them, and reading one is
// already G1a.
func check(sends []Send, reads []Read, fr FinalRead, txn bool) *Analysis {
	a := &Analysis{Counts: map[string]int{}, Examples: map[string][]string{}, LostByPartition: map[int32]int{}}
	for _, k := range AnomalyNames {
		a.Counts[k] = 0
	}

	// Every observation of (partition, offset) -> value, with a source.
	type obs struct {
		val string
		src string
	}
	atPos := map[pos][]obs{}
	addObs := func(p pos, v, src string) {
		for _, o := range atPos[p] {
			if o.val == v {
				return
			}
		}
		atPos[p] = append(atPos[p], obs{v, src})
	}
	valPos := map[string]map[pos]string{}
	addVal := func(v string, p pos, src string) {
		m := valPos[v]
		if m == nil {
			m = map[pos]string{}
			valPos[v] = m
		}
		if _, ok := m[p]; !ok {
			m[p] = src
		}
	}
	readVals := map[string]bool{}
	maxRead := map[int32]int64{}
	finalVals := map[int32]map[string]bool{}
	known := map[int32][]int64{} // offsets known to exist (read or acked)
	failed := map[string]bool{}
	for _, s := range sends {
		if s.Outcome == "fail" {
			failed[s.Value] = true
		}
		if s.Outcome != "ok" {
			continue
		}
		p := pos{s.Partition, s.Offset}
		addObs(p, s.Value, fmt.Sprintf("ack to %s at %.3fs", s.Value, s.EndMs/1000))
		addVal(s.Value, p, "ack")
		known[s.Partition] = append(known[s.Partition], s.Offset)
	}
	for _, r := range reads {
		p := pos{r.Partition, r.Offset}
		src := fmt.Sprintf("%s session %d at %.3fs", r.Consumer, r.Session, r.AtMs/1000)
		addObs(p, r.Value, src)
		addVal(r.Value, p, src)
		readVals[r.Value] = true
		if m, ok := maxRead[r.Partition]; !ok || r.Offset > m {
			maxRead[r.Partition] = r.Offset
		}
		if r.Consumer == "final" {
			if finalVals[r.Partition] == nil {
				finalVals[r.Partition] = map[string]bool{}
			}
			finalVals[r.Partition][r.Value] = true
		}
		if !txn || !failed[r.Value] {
			known[r.Partition] = append(known[r.Partition], r.Offset)
		}
	}
	for p := range known {
		ks := known[p]
		sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
		known[p] = compactInts(ks)
	}

	// inconsistent-offsets
	var positions []pos
	for p, os := range atPos {
		if len(os) > 1 {
			positions = append(positions, p)
		}
	}
	sortPos(positions)
	for _, p := range positions {
		os := atPos[p]
		desc := ""
		for i, o := range os {
			if i > 0 {
				desc += ", "
			}
			desc += fmt.Sprintf("%q (%s)", o.val, o.src)
		}
		a.add(AnomInconsistentOffsets, "p%d offset %d: %s", p.p, p.off, desc)
	}

	// duplicate
	var dupVals []string
	for v, m := range valPos {
		if len(m) > 1 {
			dupVals = append(dupVals, v)
		}
	}
	sort.Strings(dupVals)
	for _, v := range dupVals {
		var ps []pos
		for p := range valPos[v] {
			ps = append(ps, p)
		}
		sortPos(ps)
		desc := ""
		for i, p := range ps {
			if i > 0 {
				desc += ", "
			}
			desc += fmt.Sprintf("p%d@%d (%s)", p.p, p.off, valPos[v][p])
		}
		a.add(AnomDuplicate, "%q at %s", v, desc)
	}

	// G1a, lost-write, unseen
	for _, s := range sends {
		switch s.Outcome {
		case "fail":
			if readVals[s.Value] {
				a.add(AnomG1a, "%q failed definitely (%s) at %.3fs but was read", s.Value, s.Err, s.EndMs/1000)
			}
		case "ok":
			lost := false
			if m, ok := maxRead[s.Partition]; !readVals[s.Value] && ok && m > s.Offset {
				a.add(AnomLostWrite, "%q acked at p%d@%d (%.3fs), never read; reads of p%d reached offset %d", s.Value, s.Partition, s.Offset, s.EndMs/1000, s.Partition, m)
				lost = true
			} else if fr.Complete[s.Partition] && fr.End[s.Partition] > s.Offset && s.Offset >= fr.Start[s.Partition] && !finalVals[s.Partition][s.Value] {
				what := "was read earlier"
				if !readVals[s.Value] {
					what = "never read"
				}
				a.add(AnomLostWrite, "%q acked at p%d@%d (%.3fs), %s, missing from the final log of p%d [%d, %d)", s.Value, s.Partition, s.Offset, s.EndMs/1000, what, s.Partition, fr.Start[s.Partition], fr.End[s.Partition])
				lost = true
			}
			if lost {
				a.LostByPartition[s.Partition]++
			} else if !readVals[s.Value] {
				a.add(AnomUnseen, "%q acked at p%d@%d (%.3fs), never read", s.Value, s.Partition, s.Offset, s.EndMs/1000)
			}
		}
	}

	// poll-skip, nonmonotonic-poll: per consumer session and partition, in
	// the order the records were received.
	type sess struct {
		c string
		s int
		p int32
	}
	last := map[sess]int64{}
	for _, r := range reads {
		k := sess{r.Consumer, r.Session, r.Partition}
		prev, ok := last[k]
		last[k] = r.Offset
		if !ok {
			continue
		}
		switch {
		case r.Offset <= prev:
			a.add(AnomNonmonotonicPoll, "%s session %d p%d: offset %d after %d at %.3fs", r.Consumer, r.Session, r.Partition, r.Offset, prev, r.AtMs/1000)
		case r.Offset > prev+1:
			ks := known[r.Partition]
			i := sort.Search(len(ks), func(i int) bool { return ks[i] > prev })
			if i < len(ks) && ks[i] < r.Offset {
				a.add(AnomPollSkip, "%s session %d p%d: jumped from %d to %d at %.3fs, skipping existing offset %d", r.Consumer, r.Session, r.Partition, prev, r.Offset, r.AtMs/1000, ks[i])
			}
		}
	}
	if len(a.LostByPartition) == 0 {
		a.LostByPartition = nil
	}
	return a
}

func compactInts(s []int64) []int64 {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func sortPos(ps []pos) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].p != ps[j].p {
			return ps[i].p < ps[j].p
		}
		return ps[i].off < ps[j].off
	})
}
