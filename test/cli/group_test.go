package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

// groupJSON is `group describe --json` output.
type groupJSON struct {
	Groups []struct {
		Group           string `json:"group"`
		Type            string `json:"type"`
		State           string `json:"state"`
		GroupEpoch      int32  `json:"group_epoch"`
		AssignmentEpoch int32  `json:"assignment_epoch"`
		Assignor        string `json:"assignor"`
		ProtocolType    string `json:"protocol_type"`
		Protocol        string `json:"protocol"`
		Coordinator     int32  `json:"coordinator"`
		Members         []struct {
			MemberID    string `json:"member_id"`
			InstanceID  string `json:"instance_id"`
			ClientID    string `json:"client_id"`
			Host        string `json:"host"`
			Assignments []struct {
				Topic      string  `json:"topic"`
				Partitions []int32 `json:"partitions"`
			} `json:"assignments"`
			MemberEpoch *int32 `json:"member_epoch"`
			Target      []struct {
				Topic      string  `json:"topic"`
				Partitions []int32 `json:"partitions"`
			} `json:"target_assignment"`
		} `json:"members"`
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed int64  `json:"committed_offset"`
			LogEnd    int64  `json:"log_end_offset"`
			Lag       int64  `json:"lag"`
			MemberID  string `json:"member_id"`
			ClientID  string `json:"client_id"`
			Host      string `json:"host"`
			Error     string `json:"error"`
		} `json:"offsets"`
		TotalLag int64 `json:"total_lag"`
	} `json:"groups"`
}

// describeGroup returns `group describe ID --json`, checking that the
// committed offsets of every partition of topic sum to committed and that
// the total lag is lag.
func describeGroup(t *testing.T, b, id, topic string, committed, lag int64) groupJSON {
	t.Helper()
	var g groupJSON
	jsonOut(t, &g, "group", "describe", id, b)
	if len(g.Groups) != 1 || g.Groups[0].Group != id {
		t.Fatalf("group describe %s: %+v", id, g)
	}
	var sum, lagSum, end int64
	for _, o := range g.Groups[0].Offsets {
		if o.Topic != topic || o.Error != "" {
			t.Errorf("group %s offsets: %+v", id, o)
		}
		if o.Committed > 0 {
			sum += o.Committed
		}
		lagSum += o.Lag
		end += o.LogEnd
	}
	if sum != committed || g.Groups[0].TotalLag != lag || lagSum != lag || end != 100 {
		t.Errorf("group %s: committed %d (want %d), lag %d / %d (want %d), log end %d (want 100): %+v", id, sum, committed, g.Groups[0].TotalLag, lagSum, lag, end, g)
	}
	return g
}

// TestGroupsProduceConsume: 100 lines produced with `sluice produce` come
// back from `sluice consume --group`; the group then shows lag 0, a dry-run
// reset changes nothing, reset-offsets --to-earliest --execute gives lag
// 100, a consume of 10 records commits exactly 10, reset and delete are
// refused while a consumer is in the group, and delete works once it left.
func TestGroupsProduceConsume(t *testing.T) {
	p := testproc.Start(t, testproc.Options{HTTPPort: -1})
	b := "--bootstrap=" + p.Addr()
	const topic = "lines"
	ok(t, "", "topic", "create", topic, "--partitions", "3", b)

	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("line-%03d", i))
	}
	r := ok(t, strings.Join(want, "\n")+"\n", "produce", "--topic", topic, b)
	if !strings.Contains(r.stderr, "Produced 100 records to lines.") {
		t.Errorf("produce:\n%s", r)
	}
	// A separate client sees them.
	cl := p.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var seen []string
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for len(seen) < 100 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen = append(seen, string(r.Value)) })
	}
	slices.Sort(seen)
	if !slices.Equal(seen, want) {
		t.Fatalf("franz-go read %d records after sluice produce: %v", len(seen), seen)
	}

	r = ok(t, "", "consume", "--topic", topic, "--group", "readers", "--from-beginning", "--max-messages", "100", "--timeout", "20s", b)
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	slices.Sort(got)
	if !slices.Equal(got, want) || !strings.Contains(r.stderr, "Processed a total of 100 messages") {
		t.Fatalf("consume printed %d lines:\n%s", len(got), r)
	}

	r = ok(t, "", "group", "list", b)
	if f := row(r.stdout, "readers"); len(f) < 4 || f[1] != "Empty" || f[2] != "consumer" || f[3] != "1" {
		t.Errorf("group list row: %q\n%s", f, r)
	}
	describeGroup(t, b, "readers", topic, 100, 0)
	r = ok(t, "", "group", "describe", "readers", b)
	if !strings.Contains(r.stdout, "Group: readers  State: Empty") || !strings.Contains(r.stdout, "Lag: 0\n") {
		t.Errorf("group describe:\n%s", r)
	}

	// A dry run prints the plan and commits nothing.
	r = ok(t, "", "group", "reset-offsets", "readers", "--topic", topic, "--to-earliest", b)
	for part := range 3 {
		if f := row(r.stdout, "readers", topic, fmt.Sprint(part)); len(f) != 5 || f[4] != "0" {
			t.Errorf("reset plan row of partition %d: %q\n%s", part, f, r)
		}
	}
	if !strings.Contains(r.stderr, "Dry run") {
		t.Errorf("dry run:\n%s", r)
	}
	describeGroup(t, b, "readers", topic, 100, 0)

	ok(t, "", "group", "reset-offsets", "readers", "--topic", topic, "--to-earliest", "--execute", b)
	describeGroup(t, b, "readers", topic, 0, 100)

	// Only what is printed is committed.
	r = ok(t, "", "consume", "--topic", topic, "--group", "readers", "--max-messages", "10", "--timeout", "20s", b)
	if n := strings.Count(r.stdout, "\n"); n != 10 {
		t.Errorf("consume --max-messages 10 printed %d lines:\n%s", n, r)
	}
	describeGroup(t, b, "readers", topic, 10, 90)
	ok(t, "", "group", "reset-offsets", "readers", "--topic", topic, "--to-latest", "--execute", b)
	describeGroup(t, b, "readers", topic, 100, 0)

	// A member in the group: reset and delete are refused.
	member := p.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("readers"), kgo.ClientID("test-member"))
	testWait(t, 20*time.Second, "the test member in group readers", func() bool {
		pctx, pcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		member.PollFetches(pctx)
		pcancel()
		var g groupJSON
		jsonOut(t, &g, "group", "describe", "readers", b)
		return g.Groups[0].State == "Stable" && len(g.Groups[0].Members) == 1
	})
	var g groupJSON
	jsonOut(t, &g, "group", "describe", "readers", b)
	m := g.Groups[0].Members[0]
	if m.ClientID != "test-member" || len(m.Assignments) != 1 || m.Assignments[0].Topic != topic || fmt.Sprint(m.Assignments[0].Partitions) != "[0 1 2]" {
		t.Errorf("member: %+v", m)
	}
	for _, o := range g.Groups[0].Offsets {
		if o.ClientID != "test-member" {
			t.Errorf("partition %d not shown as assigned to the member: %+v", o.Partition, o)
		}
	}
	fails(t, 1, "can only be reset if the group readers is inactive, but the current state is Stable", "group", "reset-offsets", "readers", "--topic", topic, "--to-earliest", b)
	fails(t, 1, "group readers is not empty", "group", "delete", "readers", b)
	member.Close()

	testWait(t, 20*time.Second, "group readers deleted once empty", func() bool {
		return cli(t, "", "group", "delete", "readers", b).code == 0
	})
	fails(t, 1, "group readers does not exist", "group", "describe", "readers", b)
	fails(t, 1, "group readers does not exist", "group", "delete", "readers", b)

	for _, args := range [][]string{
		{"group", "reset-offsets", "readers", "--topic", topic},
		{"group", "reset-offsets", "readers", "--topic", topic, "--to-earliest", "--to-latest"},
		{"group", "reset-offsets", "readers", "--to-earliest"},
		{"group", "describe"},
	} {
		fails(t, 2, "sluice group reset-offsets ID", append(args, b)...)
	}
	fails(t, 1, "topic nope does not exist", "group", "reset-offsets", "other", "--topic", "nope", "--to-earliest", b)
}

// TestProduceConsumeOptions: keys with --key-separator and --print-key,
// --json records, acks=1, the idle timeout, and the errors.
func TestProduceConsumeOptions(t *testing.T) {
	p := testproc.Start(t, testproc.Options{HTTPPort: -1})
	b := "--bootstrap=" + p.Addr()
	ok(t, "", "topic", "create", "kv", "--partitions", "1", b)
	ok(t, "a::1\r\n", "produce", "--topic", "kv", "--key-separator", "::", "--acks", "1", b)
	ok(t, "b::2::x\n", "produce", "--topic", "kv", "--key-separator", "::", b)
	r := ok(t, "", "consume", "--topic", "kv", "--from-beginning", "--print-key", "--max-messages", "2", b)
	if r.stdout != "a\t1\nb\t2::x\n" {
		t.Errorf("consume --print-key: %q\n%s", r.stdout, r)
	}
	var doc struct {
		Topic   string `json:"topic"`
		Records []struct {
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Timestamp int64  `json:"timestamp_ms"`
			Key       string `json:"key"`
			Value     string `json:"value"`
		} `json:"records"`
	}
	jsonOut(t, &doc, "consume", "--topic", "kv", "--from-beginning", "--print-key", "--max-messages", "5", "--timeout", "2s", b)
	if len(doc.Records) != 2 || doc.Records[1].Offset != 1 || doc.Records[1].Key != "b" || doc.Records[1].Value != "2::x" || doc.Records[0].Timestamp == 0 {
		t.Errorf("consume --json: %+v", doc)
	}
	// Idle: nothing new after the end, exits after --timeout with 0 records.
	start := time.Now()
	r = ok(t, "", "consume", "--topic", "kv", "--timeout", "1s", b)
	if r.stdout != "" || !strings.Contains(r.stderr, "Processed a total of 0 messages") || time.Since(start) > 15*time.Second {
		t.Errorf("idle consume took %v:\n%s", time.Since(start), r)
	}
	if r := cli(t, "c::3\nno separator\n", "produce", "--topic", "kv", "--key-separator", "::", b); r.code != 1 || !strings.Contains(r.stderr, `line 2 has no key separator "::"`) {
		t.Errorf("a line without the separator:\n%s", r)
	}
	fails(t, 1, "topic nope does not exist", "consume", "--topic", "nope", b)
	fails(t, 1, "topic nope does not exist", "produce", "--topic", "nope", b)
	fails(t, 2, "sluice produce --topic T", "produce", "--topic", "kv", "--acks", "2", b)
	fails(t, 2, "sluice produce --topic T", "produce", b)
	fails(t, 2, "sluice consume --topic T", "consume", "--topic", "kv", "--max-messages", "-1", b)
}
