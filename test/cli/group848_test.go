package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestGroupDescribeConsumerGroup: a franz-go consumer using KIP-848
// (ServerSideBalancer) is described by `group describe` as a consumer
// group with its group and assignment epochs, assignor, and the member's
// epoch, assignment and target.
func TestGroupDescribeConsumerGroup(t *testing.T) {
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("group.consumer.heartbeat.interval.ms=200\ngroup.consumer.min.heartbeat.interval.ms=100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, testproc.Options{HTTPPort: -1, ExtraArgs: []string{"--config", props}})
	b := "--bootstrap=" + p.Addr()
	ok(t, "", "topic", "create", "kip848", "--partitions", "3", b)
	cl := p.Client(t, kgo.ConsumerGroup("g848"), kgo.ConsumeTopics("kip848"),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ServerSideBalancer())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()

	deadline := time.Now().Add(30 * time.Second)
	for {
		// Until the member's first heartbeat is committed the group
		// does not exist yet (exit 1, "does not exist").
		if r := cli(t, "", "group", "describe", "g848", b); r.code != 0 {
			if !strings.Contains(r.stderr, "does not exist") || time.Now().After(deadline) {
				t.Fatalf("group describe:\n%s", r)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var g groupJSON
		jsonOut(t, &g, "group", "describe", "g848", b)
		if len(g.Groups) == 1 && g.Groups[0].State == "Stable" && len(g.Groups[0].Members) == 1 {
			d, m := g.Groups[0], g.Groups[0].Members[0]
			if d.Type != "consumer" || d.GroupEpoch < 1 || d.AssignmentEpoch != d.GroupEpoch || d.Assignor != "uniform" ||
				m.MemberEpoch == nil || *m.MemberEpoch != d.GroupEpoch || len(m.Assignments) != 1 || len(m.Assignments[0].Partitions) != 3 ||
				len(m.Target) != 1 || len(m.Target[0].Partitions) != 3 {
				t.Fatalf("group describe: %+v", g)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group never stable: %+v", g)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r := ok(t, "", "group", "describe", "g848", b)
	if !strings.Contains(r.stdout, "Type: consumer  Group epoch: ") || !strings.Contains(r.stdout, "TARGET") {
		t.Errorf("group describe:\n%s", r)
	}
}
