package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestShareGroupListDescribe: two franz-go share consumers (kgo.ShareGroup)
// are listed by `share-group list` and described by `share-group
// describe` with their epochs and the topic's partitions spread over them.
func TestShareGroupListDescribe(t *testing.T) {
	p := testproc.Start(t, testproc.Options{HTTPPort: -1})
	b := "--bootstrap=" + p.Addr()
	ok(t, "", "topic", "create", "jobs", "--partitions", "3", b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, name := range []string{"w1", "w2"} {
		cl := p.Client(t, kgo.ClientID(name), kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"))
		go func() {
			for ctx.Err() == nil {
				cl.PollFetches(ctx)
			}
		}()
	}
	type describeJSON struct {
		Groups []struct {
			Group, State, Assignor string
			GroupEpoch             int32 `json:"group_epoch"`
			AssignmentEpoch        int32 `json:"assignment_epoch"`
			Coordinator            int32
			Members                []struct {
				MemberID    string   `json:"member_id"`
				ClientID    string   `json:"client_id"`
				Host        string   `json:"host"`
				MemberEpoch int32    `json:"member_epoch"`
				Subscribed  []string `json:"subscribed_topics"`
				Assignments []struct {
					Topic      string
					Partitions []int32
				}
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var d describeJSON
		r := cli(t, "", "share-group", "describe", "workers", b, "--json")
		if r.code == 0 {
			jsonOut(t, &d, "share-group", "describe", "workers", b)
		}
		parts, clients := 0, map[string]bool{}
		if len(d.Groups) == 1 {
			for _, m := range d.Groups[0].Members {
				clients[m.ClientID] = m.MemberEpoch == d.Groups[0].GroupEpoch
				for _, a := range m.Assignments {
					if a.Topic == "jobs" {
						parts += len(a.Partitions)
					}
				}
			}
		}
		if parts == 3 && clients["w1"] && clients["w2"] {
			if g := d.Groups[0]; g.State != "Stable" || g.Assignor != "simple" {
				t.Fatalf("describe: %+v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("share-group describe never showed both members:\n%s", r)
		}
		time.Sleep(300 * time.Millisecond)
	}
	r := ok(t, "", "share-group", "list", b)
	if !strings.Contains(r.stdout, "workers") || !strings.Contains(r.stdout, "Stable") {
		t.Fatalf("share-group list:\n%s", r)
	}
	r = ok(t, "", "share-group", "describe", "workers", b)
	if !strings.Contains(r.stdout, "MEMBER-ID") || !strings.Contains(r.stdout, "jobs:") {
		t.Fatalf("share-group describe:\n%s", r)
	}
}
