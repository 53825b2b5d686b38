package consumer

import (
	"slices"
	"strings"
)

// MemberSpec is what an assignor knows of one member: its instance id
// (static membership; empty if none), the topics it subscribes to
// (resolved to ids, only topics that exist) and its partitions in the
// current target assignment.
type MemberSpec struct {
	InstanceID string
	Subscribed []TopicID
	Target     Assignment
}

// AssignmentSpec is an assignor's input (Kafka's GroupSpec and
// SubscribedTopicDescriber): the members and the partition count of every
// topic some member subscribes to.
type AssignmentSpec struct {
	Members    map[string]MemberSpec
	Partitions map[TopicID]int32
}

// Assignor computes a group's target assignment: every partition of a
// subscribed topic to exactly one member subscribed to it (Kafka's
// ConsumerGroupPartitionAssignor). It must be deterministic.
type Assignor interface {
	// Name is the name members select it by (ServerAssignor).
	Name() string
	// Assign returns each member's partitions; every member of spec has an
	// entry, possibly empty.
	Assign(spec AssignmentSpec) map[string]Assignment
}

// DefaultAssignors are Kafka's group.consumer.assignors default: uniform
// (the default, the first) and range.
func DefaultAssignors() []Assignor { return []Assignor{UniformAssignor{}, RangeAssignor{}} }

func sortedMembers(spec AssignmentSpec) []string {
	ids := make([]string, 0, len(spec.Members))
	for id := range spec.Members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func subscribes(m MemberSpec, t TopicID) bool { return slices.Contains(m.Subscribed, t) }

// homogeneous reports whether every member subscribes to the same topics.
func homogeneous(spec AssignmentSpec, ids []string) bool {
	for _, id := range ids[1:] {
		a, b := spec.Members[ids[0]].Subscribed, spec.Members[id].Subscribed
		if len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] {
			continue // the same resolved list
		}
		if len(a) != len(b) {
			return false
		}
		for _, t := range a {
			if !slices.Contains(b, t) {
				return false
			}
		}
	}
	return true
}

// UniformAssignor is Kafka's "uniform" server assignor
// (org.apache.kafka.coordinator.group.assignor.UniformAssignor): partitions
// spread evenly over the members, keeping each member's current partitions
// where balance allows (sticky). Racks are not considered.
type UniformAssignor struct{}

// Name is "uniform".
func (UniformAssignor) Name() string { return "uniform" }

// Assign implements Assignor.
func (UniformAssignor) Assign(spec AssignmentSpec) map[string]Assignment {
	ids := sortedMembers(spec)
	out := make(map[string]Assignment, len(ids))
	if len(ids) == 0 {
		return out
	}
	if homogeneous(spec, ids) {
		return uniformHomogeneous(spec, ids)
	}
	return uniformHeterogeneous(spec, ids)
}

// sticky returns, for each member in ids order, the current partitions it
// may keep: subscribed, existing, and not already kept by an earlier
// member.
func sticky(spec AssignmentSpec, ids []string) (map[string][]TP, map[TP]bool) {
	taken := map[TP]bool{}
	kept := make(map[string][]TP, len(ids))
	for _, id := range ids {
		m := spec.Members[id]
		for _, tp := range m.Target.TPs() {
			n, ok := spec.Partitions[tp.Topic]
			if !ok || tp.Partition >= n || !subscribes(m, tp.Topic) || taken[tp] {
				continue
			}
			taken[tp] = true
			kept[id] = append(kept[id], tp)
		}
	}
	return kept, taken
}

// allPartitions lists every partition of topics, sorted.
func allPartitions(spec AssignmentSpec, topics []TopicID) []TP {
	var out []TP
	for _, t := range topics {
		for p := range spec.Partitions[t] {
			out = append(out, TP{t, p})
		}
	}
	slices.SortFunc(out, cmpTP)
	return out
}

// uniformHomogeneous gives each member floor(P/M) partitions and P%M of
// them one more, the extra ones going first to the members that already
// hold more than the floor, and keeps as many current partitions as those
// quotas allow: a member joining takes only its quota from the others.
func uniformHomogeneous(spec AssignmentSpec, ids []string) map[string]Assignment {
	all := allPartitions(spec, spec.Members[ids[0]].Subscribed)
	kept, _ := sticky(spec, ids)
	minQ, extra := len(all)/len(ids), len(all)%len(ids)
	quota := make(map[string]int, len(ids))
	for _, id := range ids {
		quota[id] = minQ
	}
	// The extra partitions go first to members that can keep one more
	// of their own (each saves a move), then to the others.
	for pass := 0; pass < 2 && extra > 0; pass++ {
		for _, id := range ids {
			if extra == 0 {
				break
			}
			if quota[id] == minQ && (pass == 1 || len(kept[id]) > minQ) {
				quota[id]++
				extra--
			}
		}
	}
	owned := map[TP]bool{}
	res := make(map[string][]TP, len(ids))
	for _, id := range ids {
		k := kept[id]
		if len(k) > quota[id] {
			k = k[:quota[id]]
		}
		res[id] = slices.Clone(k)
		for _, tp := range k {
			owned[tp] = true
		}
	}
	free := all[:0:0]
	for _, tp := range all {
		if !owned[tp] {
			free = append(free, tp)
		}
	}
	for _, id := range ids {
		for len(res[id]) < quota[id] && len(free) > 0 {
			res[id] = append(res[id], free[0])
			free = free[1:]
		}
	}
	return toAssignments(ids, res)
}

// uniformHeterogeneous handles members subscribing to different topics:
// current partitions are kept, the others go to the least loaded
// subscribed member, then partitions move from a member to a subscribed
// member with at least two fewer until no such move exists.
func uniformHeterogeneous(spec AssignmentSpec, ids []string) map[string]Assignment {
	var topics []TopicID
	for t := range spec.Partitions {
		topics = append(topics, t)
	}
	all := allPartitions(spec, topics)
	kept, taken := sticky(spec, ids)
	owner := map[TP]string{}
	count := map[string]int{}
	for id, tps := range kept {
		for _, tp := range tps {
			owner[tp] = id
		}
		count[id] = len(tps)
	}
	// leastLoaded is the subscribed member with the fewest partitions.
	leastLoaded := func(t TopicID) (string, bool) {
		best, found := "", false
		for _, id := range ids {
			if subscribes(spec.Members[id], t) && (!found || count[id] < count[best]) {
				best, found = id, true
			}
		}
		return best, found
	}
	for _, tp := range all {
		if taken[tp] {
			continue
		}
		if id, ok := leastLoaded(tp.Topic); ok {
			owner[tp] = id
			count[id]++
		}
	}
	for moved := true; moved; {
		moved = false
		for _, tp := range all {
			from, ok := owner[tp]
			if !ok {
				continue
			}
			to, _ := leastLoaded(tp.Topic)
			if count[from] > count[to]+1 {
				owner[tp] = to
				count[from]--
				count[to]++
				moved = true
			}
		}
	}
	res := make(map[string][]TP, len(ids))
	for tp, id := range owner {
		res[id] = append(res[id], tp)
	}
	return toAssignments(ids, res)
}

// RangeAssignor is Kafka's server-side "range" assignor
// (org.apache.kafka.coordinator.group.assignor.RangeAssignor): for each
// topic, the members subscribed to it get consecutive ranges of
// partitions, the first P%M one more, in the order static members first
// by instance id, then the others by member id. Members with the same
// subscriptions get the same partition numbers of every topic
// (co-partitioning). Like Kafka's, it is not sticky: the assignment
// follows the members' order, which instance ids keep across restarts.
type RangeAssignor struct{}

// Name is "range".
func (RangeAssignor) Name() string { return "range" }

// Assign implements Assignor.
func (RangeAssignor) Assign(spec AssignmentSpec) map[string]Assignment {
	ids := sortedMembers(spec)
	slices.SortStableFunc(ids, func(a, b string) int {
		ia, ib := spec.Members[a].InstanceID, spec.Members[b].InstanceID
		switch {
		case ia != "" && ib != "":
			return strings.Compare(ia, ib)
		case ia != "":
			return -1
		case ib != "":
			return 1
		}
		return 0
	})
	res := make(map[string][]TP, len(ids))
	for t, n := range spec.Partitions {
		var subs []string
		for _, id := range ids {
			if subscribes(spec.Members[id], t) {
				subs = append(subs, id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		q, extra := int(n)/len(subs), int(n)%len(subs)
		p := int32(0)
		for i, id := range subs {
			k := q
			if i < extra {
				k++
			}
			for range k {
				res[id] = append(res[id], TP{t, p})
				p++
			}
		}
	}
	return toAssignments(ids, res)
}

// toAssignments builds the result; a member with nothing gets nil.
func toAssignments(ids []string, res map[string][]TP) map[string]Assignment {
	out := make(map[string]Assignment, len(ids))
	for _, id := range ids {
		if len(res[id]) == 0 {
			out[id] = nil
			continue
		}
		out[id] = assignmentOf(res[id])
	}
	return out
}
