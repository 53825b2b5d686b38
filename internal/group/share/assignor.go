package share

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
)

// AssignmentSpec is a server assignor's input: each member's subscribed
// topics that exist, the topics' partition counts, and each member's
// previous target assignment (for stickiness).
type AssignmentSpec struct {
	Members    map[string][]TopicID
	Partitions map[TopicID]int32
	Previous   map[string]Assignment
}

// Assignor is a share group's server assignor (Kafka's
// ShareGroupPartitionAssignor).
type Assignor interface {
	// Name is the assignor's name in group.share.assignors and in
	// ShareGroupDescribe.
	Name() string
	// Assign returns every member's target partitions (a member without
	// partitions has an empty entry).
	Assign(spec AssignmentSpec) map[string]Assignment
}

// SimpleAssignor is Kafka's SimpleAssignor for share groups ("simple",
// KIP-932): every partition of a subscribed topic goes to at least one of
// the members subscribing to it, and the partitions are spread evenly.
// Per topic, with at least as many partitions as subscribers, each
// partition goes to exactly one subscriber and the subscribers' counts
// differ by at most one (the extra partitions going to the members with
// the fewest so far, so a homogeneous group is balanced overall); with
// more subscribers than partitions, each subscriber gets one partition
// and the partitions are shared by as equal numbers of members as
// possible. Members keep partitions of their previous target where that
// stays within these bounds.
type SimpleAssignor struct{}

// Name implements Assignor.
func (SimpleAssignor) Name() string { return "simple" }

// Assign implements Assignor.
func (SimpleAssignor) Assign(spec AssignmentSpec) map[string]Assignment {
	out := make(map[string]Assignment, len(spec.Members))
	subscribers := map[TopicID][]string{}
	for id, topics := range spec.Members {
		out[id] = Assignment{}
		for _, t := range topics {
			if spec.Partitions[t] > 0 {
				subscribers[t] = append(subscribers[t], id)
			}
		}
	}
	load := make(map[string]int, len(spec.Members))
	topics := slices.SortedFunc(maps.Keys(subscribers), func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	for _, t := range topics {
		members := subscribers[t]
		// Members with the least load first, ties by id.
		slices.SortFunc(members, func(a, b string) int {
			return cmp.Or(cmp.Compare(load[a], load[b]), cmp.Compare(a, b))
		})
		n := int(spec.Partitions[t])
		var got map[string][]int32
		if len(members) <= n {
			got = spreadPartitions(t, n, members, spec.Previous)
		} else {
			got = shareTopic(t, n, members, spec.Previous)
		}
		for id, ps := range got {
			if len(ps) == 0 {
				continue
			}
			slices.Sort(ps)
			out[id][t] = ps
			load[id] += len(ps)
		}
	}
	return out
}

// previous lists the valid partitions of topic t in member id's previous
// target.
func previous(prev map[string]Assignment, id string, t TopicID, n int) []int32 {
	var out []int32
	for _, p := range prev[id][t] {
		if int(p) < n {
			out = append(out, p)
		}
	}
	return out
}

// spreadPartitions gives each of the n partitions of t to exactly one of
// members (len(members) <= n), members[:n%len] getting one more.
func spreadPartitions(t TopicID, n int, members []string, prev map[string]Assignment) map[string][]int32 {
	k := len(members)
	quota := make(map[string]int, k)
	for i, id := range members {
		quota[id] = n / k
		if i < n%k {
			quota[id]++
		}
	}
	taken := make([]bool, n)
	got := make(map[string][]int32, k)
	for _, id := range members {
		for _, p := range previous(prev, id, t, n) {
			if len(got[id]) < quota[id] && !taken[p] {
				taken[p] = true
				got[id] = append(got[id], p)
			}
		}
	}
	next := 0
	for _, id := range members {
		for len(got[id]) < quota[id] {
			for taken[next] {
				next++
			}
			taken[next] = true
			got[id] = append(got[id], int32(next))
		}
	}
	return got
}

// shareTopic gives each of members (more than the n partitions of t) one
// partition, each partition going to n/len or n/len+1 members.
func shareTopic(t TopicID, n int, members []string, prev map[string]Assignment) map[string][]int32 {
	base := len(members) / n
	count := make([]int, n)
	got := make(map[string][]int32, len(members))
	for _, id := range members {
		for _, p := range previous(prev, id, t, n) {
			if count[p] < base {
				count[p]++
				got[id] = []int32{p}
				break
			}
		}
	}
	for _, id := range members {
		if len(got[id]) > 0 {
			continue
		}
		least := 0
		for p := range count {
			if count[p] < count[least] {
				least = p
			}
		}
		count[least]++
		got[id] = []int32{int32(least)}
	}
	return got
}
