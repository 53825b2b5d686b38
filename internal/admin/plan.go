package admin

// The reassignment plan of `sluice reassign plan` (what Kafka's
// kafka-reassign-partitions.sh --generate proposes), and its JSON file
// format (Kafka's reassignment JSON, version 1).
//
// The plan places every replica of the given topics on the given brokers
// so that, over all the topics together:
//
//   - no broker holds two replicas of one partition;
//   - every broker holds the same number of replicas, within one;
//   - every broker is the preferred leader (first replica) of the same
//     number of partitions, within one.
//
// Replicas are dealt round-robin: the partitions' replica slots, one
// topic after the other, take the brokers in turn, so a partition's r
// replicas are r consecutive brokers (distinct when r <= brokers) and the
// counts differ by at most one. The leaders are then chosen among each
// partition's replicas by a maximum flow in which broker b can lead at most
// floor(P/n) partitions plus one of P mod n "extra" leaderships: a flow
// of P gives every broker floor(P/n) or ceil(P/n) leaderships. With one
// replication factor such a flow always exists (any k partitions' replica
// sets cover at least k brokers, Hall's condition). With mixed ones it may
// not; then the leaders are dealt round-robin instead and a second flow
// places the followers within the same bounds (the plan is an error only
// if that fails too, which no case of the unit test does).
//
// Unlike Kafka's --generate (which starts at a random broker) the plan is
// deterministic, and like it, it does not try to keep replicas where they
// are.

import (
	"encoding/json"
	"fmt"
	"slices"
)

// reassignPartition is one partition of a reassignment JSON file.
type reassignPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// reassignDoc is Kafka's reassignment JSON:
// {"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}.
type reassignDoc struct {
	Version    int                 `json:"version"`
	Partitions []reassignPartition `json:"partitions"`
}

// planTopic is a topic to place: its partition count and replication
// factor.
type planTopic struct {
	Name       string
	Partitions int
	RF         int
}

// planAssignment computes a balanced placement (see the file comment) of
// topics' partitions on brokers.
func planAssignment(topics []planTopic, brokers []int32) ([]reassignPartition, error) {
	bs := slices.Clone(brokers)
	slices.Sort(bs)
	if len(bs) == 0 {
		return nil, fmt.Errorf("no brokers given")
	}
	if len(slices.Compact(slices.Clone(bs))) != len(bs) {
		return nil, fmt.Errorf("broker list %s names a broker twice", ints(brokers))
	}
	n := len(bs)
	var out []reassignPartition
	slot := 0
	for _, t := range topics {
		if t.RF < 1 || t.RF > n {
			return nil, fmt.Errorf("topic %s: replication factor %d with %d brokers: expected 1 to %d", t.Name, t.RF, n, n)
		}
		for p := 0; p < t.Partitions; p++ {
			reps := make([]int32, t.RF)
			for j := range reps {
				reps[j] = bs[(slot+j)%n]
			}
			slot += t.RF
			out = append(out, reassignPartition{Topic: t.Name, Partition: int32(p), Replicas: reps})
		}
	}
	if err := balanceLeaders(out, bs); err != nil {
		// Mixed replication factors only: deal the leaders round-robin
		// and let a flow place the followers.
		return leadersFirst(out, bs)
	}
	return out, nil
}

// leadersFirst re-places parts (their replica counts kept): partition i
// is led by broker i mod n, and a maximum flow places the followers so
// that every broker holds floor(R/n) or ceil(R/n) of the R replicas.
func leadersFirst(parts []reassignPartition, brokers []int32) ([]reassignPartition, error) {
	P, n := len(parts), len(brokers)
	R, F := 0, 0
	leads := make([]int, n)
	for i, pt := range parts {
		R += len(pt.Replicas)
		F += len(pt.Replicas) - 1
		leads[i%n]++
	}
	q, m := R/n, R%n
	src, extra, sink := 0, 1+P+n, 2+P+n
	g := newFlow(3 + P + n)
	edges := make([][]int, P)
	for i, pt := range parts {
		g.add(src, 1+i, len(pt.Replicas)-1)
		for k := 1; k < n; k++ { // the brokers after the leader, in turn
			edges[i] = append(edges[i], g.add(1+i, 1+P+(i+k)%n, 1))
		}
	}
	forced := 0
	for j := range n {
		switch {
		case leads[j] == q+1: // its leaderships are its ceil(R/n) replicas
			forced++
		case leads[j] > q+1:
			return nil, fmt.Errorf("cannot balance %d replicas on %d brokers", R, n)
		default:
			if q-leads[j] > 0 {
				g.add(1+P+j, sink, q-leads[j])
			}
			g.add(1+P+j, extra, 1)
		}
	}
	if m-forced < 0 {
		return nil, fmt.Errorf("cannot balance %d replicas on %d brokers", R, n)
	}
	if m-forced > 0 {
		g.add(extra, sink, m-forced)
	}
	if f := g.maxFlow(src, sink); f != F {
		return nil, fmt.Errorf("cannot balance the replicas and leaders of these topics (%d of %d followers placed); plan topics of different replication factors separately", f, F)
	}
	out := make([]reassignPartition, P)
	for i, pt := range parts {
		reps := []int32{brokers[i%n]}
		for k, e := range edges[i] {
			if g.cap[e] == 0 {
				reps = append(reps, brokers[(i+k+1)%n])
			}
		}
		out[i] = reassignPartition{Topic: pt.Topic, Partition: pt.Partition, Replicas: reps}
	}
	return out, nil
}

// balanceLeaders moves to the front of each partition's replicas the
// leader the flow assigns it.
func balanceLeaders(parts []reassignPartition, brokers []int32) error {
	P, n := len(parts), len(brokers)
	if P == 0 {
		return nil
	}
	idx := map[int32]int{}
	for i, b := range brokers {
		idx[b] = i
	}
	q, m := P/n, P%n
	// Nodes: source, partitions, brokers, extra, sink.
	src, extra, sink := 0, 1+P+n, 2+P+n
	g := newFlow(3 + P + n)
	edge := make([][]int, P) // per partition, its edges to brokers
	for i, pt := range parts {
		g.add(src, 1+i, 1)
		for _, b := range pt.Replicas {
			edge[i] = append(edge[i], g.add(1+i, 1+P+idx[b], 1))
		}
	}
	for j := range n {
		if q > 0 {
			g.add(1+P+j, sink, q)
		}
		if m > 0 {
			g.add(1+P+j, extra, 1)
		}
	}
	if m > 0 {
		g.add(extra, sink, m)
	}
	if f := g.maxFlow(src, sink); f != P {
		return fmt.Errorf("cannot balance the leaders of these topics' replica sets (%d of %d placed); plan topics of different replication factors separately", f, P)
	}
	for i := range parts {
		for k, e := range edge[i] {
			if g.cap[e] == 0 { // saturated: the leader
				reps := parts[i].Replicas
				leader := reps[k]
				parts[i].Replicas = append([]int32{leader}, slices.Delete(slices.Clone(reps), k, k+1)...)
				break
			}
		}
	}
	return nil
}

// flow is a small Dinic max-flow graph with integer capacities.
type flow struct {
	head  []int
	next  []int
	to    []int
	cap   []int
	level []int
	iter  []int
}

func newFlow(nodes int) *flow {
	f := &flow{head: make([]int, nodes), level: make([]int, nodes), iter: make([]int, nodes)}
	for i := range f.head {
		f.head[i] = -1
	}
	return f
}

// add adds an edge u->v and its residual; it returns the edge's index.
func (f *flow) add(u, v, c int) int {
	e := len(f.to)
	f.to, f.cap, f.next = append(f.to, v), append(f.cap, c), append(f.next, f.head[u])
	f.head[u] = e
	f.to, f.cap, f.next = append(f.to, u), append(f.cap, 0), append(f.next, f.head[v])
	f.head[v] = e + 1
	return e
}

func (f *flow) bfs(s, t int) bool {
	for i := range f.level {
		f.level[i] = -1
	}
	f.level[s] = 0
	queue := []int{s}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for e := f.head[u]; e >= 0; e = f.next[e] {
			if f.cap[e] > 0 && f.level[f.to[e]] < 0 {
				f.level[f.to[e]] = f.level[u] + 1
				queue = append(queue, f.to[e])
			}
		}
	}
	return f.level[t] >= 0
}

func (f *flow) dfs(u, t, pushed int) int {
	if u == t {
		return pushed
	}
	for ; f.iter[u] >= 0; f.iter[u] = f.next[f.iter[u]] {
		e := f.iter[u]
		v := f.to[e]
		if f.cap[e] > 0 && f.level[v] == f.level[u]+1 {
			if d := f.dfs(v, t, min(pushed, f.cap[e])); d > 0 {
				f.cap[e] -= d
				f.cap[e^1] += d
				return d
			}
		}
	}
	return 0
}

func (f *flow) maxFlow(s, t int) int {
	total := 0
	for f.bfs(s, t) {
		copy(f.iter, f.head)
		for {
			d := f.dfs(s, t, int(^uint(0)>>1))
			if d == 0 {
				break
			}
			total += d
		}
	}
	return total
}

// parseReassignment reads and checks a reassignment JSON file: version 1,
// at least one partition, each named once with distinct, non-negative
// replica ids.
func parseReassignment(data []byte) (reassignDoc, error) {
	var doc reassignDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return doc, fmt.Errorf("not a reassignment JSON file: %v", err)
	}
	if doc.Version != 1 {
		return doc, fmt.Errorf("version %d: expected 1", doc.Version)
	}
	if len(doc.Partitions) == 0 {
		return doc, fmt.Errorf("no partitions")
	}
	seen := map[string]bool{}
	for _, p := range doc.Partitions {
		key := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		switch {
		case p.Topic == "" || p.Partition < 0:
			return doc, fmt.Errorf("partition %q: needs a topic and a partition >= 0", key)
		case seen[key]:
			return doc, fmt.Errorf("partition %s is listed twice", key)
		case len(p.Replicas) == 0:
			return doc, fmt.Errorf("partition %s has no replicas", key)
		case len(p.LogDirs) > 0 && len(p.LogDirs) != len(p.Replicas):
			return doc, fmt.Errorf("partition %s: %d log_dirs for %d replicas", key, len(p.LogDirs), len(p.Replicas))
		}
		seen[key] = true
		rs := slices.Clone(p.Replicas)
		slices.Sort(rs)
		if len(slices.Compact(rs)) != len(p.Replicas) || rs[0] < 0 {
			return doc, fmt.Errorf("partition %s: replicas %v must be distinct broker ids", key, p.Replicas)
		}
	}
	return doc, nil
}
