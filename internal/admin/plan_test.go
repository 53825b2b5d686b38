package admin

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// checkPlan fails unless plan places every partition of topics with its
// replication factor on distinct brokers of the list, with replica and
// preferred-leader counts within one across the brokers.
func checkPlan(t *testing.T, what string, topics []planTopic, brokers []int32, plan []reassignPartition) {
	t.Helper()
	replicas, leaders := map[int32]int{}, map[int32]int{}
	for _, b := range brokers {
		replicas[b], leaders[b] = 0, 0
	}
	i := 0
	for _, tp := range topics {
		for p := 0; p < tp.Partitions; p++ {
			if i >= len(plan) {
				t.Fatalf("%s: %d partitions planned, want more", what, len(plan))
			}
			pp := plan[i]
			i++
			if pp.Topic != tp.Name || pp.Partition != int32(p) || len(pp.Replicas) != tp.RF {
				t.Fatalf("%s: partition %d of %s planned as %+v", what, p, tp.Name, pp)
			}
			seen := map[int32]bool{}
			for _, b := range pp.Replicas {
				if _, ok := replicas[b]; !ok || seen[b] {
					t.Fatalf("%s: %s-%d replicas %v: unknown or repeated broker", what, pp.Topic, pp.Partition, pp.Replicas)
				}
				seen[b] = true
				replicas[b]++
			}
			leaders[pp.Replicas[0]]++
		}
	}
	if i != len(plan) {
		t.Fatalf("%s: %d partitions planned, want %d", what, len(plan), i)
	}
	spread := func(m map[int32]int) int {
		lo, hi := 1<<30, 0
		for _, c := range m {
			lo, hi = min(lo, c), max(hi, c)
		}
		return hi - lo
	}
	if spread(replicas) > 1 || spread(leaders) > 1 {
		t.Fatalf("%s: replicas per broker %v, leaders per broker %v: not within 1", what, replicas, leaders)
	}
}

// TestPlanBalanced: every combination of 1-7 brokers, 1-3 topics of 0-23
// partitions and replication factors 1..brokers (the same for every
// topic, and mixed) gives a balanced plan; the plan is deterministic.
func TestPlanBalanced(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := 0
	for n := 1; n <= 7; n++ {
		brokers := make([]int32, n)
		for i := range brokers {
			brokers[i] = int32(10 + 3*i) // not 0..n-1
		}
		rng.Shuffle(n, func(i, j int) { brokers[i], brokers[j] = brokers[j], brokers[i] })
		for rf := 1; rf <= n; rf++ {
			for parts := 0; parts <= 23; parts++ {
				topics := []planTopic{{"a", parts, rf}, {"b", (parts * 7) % 5, rf}}
				plan, err := planAssignment(topics, brokers)
				if err != nil {
					t.Fatalf("%d brokers, rf %d, %d partitions: %v", n, rf, parts, err)
				}
				what := fmt.Sprintf("%d brokers, rf %d, %d+%d partitions", n, rf, parts, topics[1].Partitions)
				checkPlan(t, what, topics, brokers, plan)
				again, _ := planAssignment(topics, brokers)
				if !reflect.DeepEqual(plan, again) {
					t.Fatalf("%s: not deterministic", what)
				}
				cases++
			}
		}
		// Mixed replication factors.
		for range 500 {
			var topics []planTopic
			for k := range 1 + rng.IntN(3) {
				topics = append(topics, planTopic{fmt.Sprintf("t%d", k), rng.IntN(24), 1 + rng.IntN(n)})
			}
			plan, err := planAssignment(topics, brokers)
			if err != nil {
				t.Fatalf("%d brokers, %+v: %v", n, topics, err)
			}
			checkPlan(t, fmt.Sprintf("%d brokers, %+v", n, topics), topics, brokers, plan)
			cases++
		}
	}
	t.Logf("%d balanced plans", cases)
}

// TestPlanExample: 3 brokers, 6 partitions of RF 2: the printed plan.
func TestPlanExample(t *testing.T) {
	plan, err := planAssignment([]planTopic{{"orders", 6, 2}}, []int32{3, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range plan {
		got = append(got, fmt.Sprintf("%d:%v", p.Partition, p.Replicas))
	}
	// Slots 1,2 | 3,1 | 2,3 | 1,2 | 3,1 | 2,3; leaders balanced 2/2/2.
	checkPlan(t, "example", []planTopic{{"orders", 6, 2}}, []int32{1, 2, 3}, plan)
	if s := strings.Join(got, " "); strings.Count(s, "[") != 6 {
		t.Errorf("plan %s", s)
	}
}

func TestPlanErrors(t *testing.T) {
	for _, c := range []struct {
		topics  []planTopic
		brokers []int32
		want    string
	}{
		{[]planTopic{{"a", 3, 4}}, []int32{1, 2, 3}, "replication factor 4 with 3 brokers"},
		{[]planTopic{{"a", 3, 0}}, []int32{1, 2, 3}, "replication factor 0"},
		{[]planTopic{{"a", 3, 1}}, nil, "no brokers"},
		{[]planTopic{{"a", 3, 1}}, []int32{1, 2, 1}, "names a broker twice"},
	} {
		if _, err := planAssignment(c.topics, c.brokers); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v on %v: %v, want %q", c.topics, c.brokers, err, c.want)
		}
	}
}

func TestParseReassignment(t *testing.T) {
	doc, err := parseReassignment([]byte(`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},{"topic":"a","partition":1,"replicas":[2,3]}]}`))
	if err != nil || len(doc.Partitions) != 2 || !slices.Equal(doc.Partitions[1].Replicas, []int32{2, 3}) {
		t.Fatalf("%+v %v", doc, err)
	}
	for in, want := range map[string]string{
		`{"version":2,"partitions":[{"topic":"a","partition":0,"replicas":[1]}]}`:                                            "version 2",
		`{"version":1,"partitions":[]}`:                                                                                      "no partitions",
		`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,1]}]}`:                                          "must be distinct",
		`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[]}]}`:                                             "no replicas",
		`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":"a","partition":0,"replicas":[2]}]}`: "listed twice",
		`{"version":1,"partitions":[{"topic":"","partition":0,"replicas":[1]}]}`:                                             "needs a topic",
		`{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`:                       "log_dirs",
		`[1,2]`: "not a reassignment JSON file",
	} {
		if _, err := parseReassignment([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
