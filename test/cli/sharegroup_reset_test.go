package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestShareGroupResetOffsets sets a share group's start offsets with
// `sluice share-group reset-offsets` (a dry run first) and reads them back
// with a separate kadm client (DescribeShareGroupOffsets).
func TestShareGroupResetOffsets(t *testing.T) {
	p := testproc.Start(t, testproc.Options{HTTPPort: -1})
	b := "--bootstrap=" + p.Addr()
	const topic, group = "queue", "workers"
	ok(t, "", "topic", "create", topic, "--partitions", "2", b)
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("job-%02d", i))
	}
	ok(t, strings.Join(lines, "\n")+"\n", "produce", "--topic", topic, b)

	adm := kadm.NewClient(p.Client(t))
	startOf := func(part int32) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		d, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		o, found := d[group].Offsets.Lookup(topic, part)
		if !found || o.Err != nil {
			return -1
		}
		return o.StartOffset
	}

	r := ok(t, "", "share-group", "reset-offsets", group, "--topic", topic+":0", "--to-offset", "3", b)
	if !strings.Contains(r.stderr, "Dry run") || row(r.stdout, group) == nil {
		t.Fatalf("dry run:\n%s", r)
	}
	if got := startOf(0); got != -1 {
		t.Fatalf("a dry run set start offset %d", got)
	}

	r = ok(t, "", "share-group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", "--json", b)
	var out struct {
		Executed   bool `json:"executed"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			New       int64 `json:"new_start_offset"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || !out.Executed || len(out.Partitions) != 2 {
		t.Fatalf("reset --json: %v\n%s", err, r)
	}
	for _, part := range []int32{0, 1} {
		if got := startOf(part); got != 0 {
			t.Fatalf("partition %d start offset %d after --to-earliest, want 0", part, got)
		}
	}
	ends := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	lo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	// Move the partition holding records to its end; the other stays.
	full, other := int32(0), int32(1)
	if ends[1] > ends[0] {
		full, other = 1, 0
	}
	ok(t, "", "share-group", "reset-offsets", group, "--topic", fmt.Sprintf("%s:%d", topic, full), "--to-latest", "--execute", b)
	if got := startOf(full); got != ends[full] || got == 0 {
		t.Fatalf("partition %d start offset %d after --to-latest, want the end offset %d", full, got, ends[full])
	}
	if got := startOf(other); got != 0 {
		t.Fatalf("partition %d start offset %d changed by a reset of partition %d", other, got, full)
	}

	if r := cli(t, "", "share-group", "reset-offsets", group, "--topic", topic, b); r.code != 2 {
		t.Fatalf("reset without a target: want exit 2\n%s", r)
	}
}
