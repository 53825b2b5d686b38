package chaos

import "sort"

// The group workload's anomalies (docs/chaos.md states the invariants).
const (
	// AnomDoubleOwner: a partition was assigned to a member while another
	// member, at the same generation (classic) or member epoch (KIP-848),
	// still held it, as the members' own assignment callbacks saw it.
	AnomDoubleOwner = "double-owner"
	// AnomCommitBackward: an observation of the group's committed offsets
	// found a partition's offset below an earlier observation's.
	AnomCommitBackward = "commit-backward"
	// AnomUnconsumed: an acknowledged send that no group member consumed
	// by the end of the run (after the members drained the topic).
	AnomUnconsumed = "unconsumed"
)

// GroupAnomalyNames lists the group workload's own anomalies.
var GroupAnomalyNames = []string{AnomDoubleOwner, AnomCommitBackward, AnomUnconsumed}

// CheckGroup checks the group workload's events (in time order) against
// the acknowledged sends and adds what it finds to a.
func CheckGroup(a *Analysis, events []GroupEvent, sends []Send) {
	a.Names = append(append([]string(nil), a.Kinds()...), GroupAnomalyNames...)
	for _, k := range GroupAnomalyNames {
		if _, ok := a.Counts[k]; !ok {
			a.Counts[k] = 0
		}
	}
	type owner struct {
		member string
		gen    int32
	}
	owners := map[int32]owner{}
	committed := map[int32]int64{}
	consumed := map[string]bool{}
	for _, e := range events {
		switch e.Kind {
		case "assigned":
			for _, p := range e.Partitions {
				if o, ok := owners[p]; ok && o.member != e.Member && o.gen == e.Generation {
					a.add(AnomDoubleOwner, "partition %d assigned to %s at generation %d at %.0fms while %s held it at the same generation", p, e.Member, e.Generation, e.AtMs, o.member)
				}
				owners[p] = owner{e.Member, e.Generation}
			}
		case "revoked", "lost":
			for _, p := range e.Partitions {
				if owners[p].member == e.Member {
					delete(owners, p)
				}
			}
		case "leave", "crash":
			for p, o := range owners {
				if o.member == e.Member {
					delete(owners, p)
				}
			}
		case "consumed":
			for _, v := range e.Values {
				consumed[v] = true
			}
		case "committed":
			for i, p := range e.Partitions {
				off := e.Offsets[i]
				if prev, ok := committed[p]; ok && off < prev {
					a.add(AnomCommitBackward, "partition %d committed offset %d at %.0fms, below %d seen before", p, off, e.AtMs, prev)
				}
				if off > committed[p] || !hasKey(committed, p) {
					committed[p] = off
				}
			}
		}
	}
	var missing []Send
	for _, s := range sends {
		if s.Outcome == "ok" && !consumed[s.Value] {
			missing = append(missing, s)
		}
	}
	sort.Slice(missing, func(i, j int) bool { return missing[i].StartMs < missing[j].StartMs })
	for _, s := range missing {
		a.add(AnomUnconsumed, "%s acknowledged at partition %d offset %d, never consumed by the group", s.Value, s.Partition, s.Offset)
	}
}

func hasKey(m map[int32]int64, k int32) bool {
	_, ok := m[k]
	return ok
}
