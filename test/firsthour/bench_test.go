package firsthour

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestBenchCreatesNamedTopic: sluice-bench --topic NAME against a topic
// that does not exist creates it with --partitions and keeps it (it used to
// count every record as UNKNOWN_TOPIC_OR_PARTITION and still print a rate).
func TestBenchCreatesNamedTopic(t *testing.T) {
	root, err := testproc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bench := filepath.Join(t.TempDir(), "sluice-bench")
	if out, err := exec.Command("go", "build", "-o", bench, filepath.Join(root, "cmd", "sluice-bench")).CombinedOutput(); err != nil {
		t.Fatalf("building sluice-bench: %v\n%s", err, out)
	}
	p := testproc.Start(t, testproc.Options{})
	for run := 1; run <= 2; run++ { // the second run finds the topic
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, bench, "--brokers", p.Addr(), "--topic", "bench-named", "--partitions", "5",
			"--records", "2000", "--consume=false", "--json").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	td, err := kadm.NewClient(p.Client(t)).ListTopics(ctx, "bench-named")
	if err != nil {
		t.Fatal(err)
	}
	if !td.Has("bench-named") || len(td["bench-named"].Partitions) != 5 {
		t.Fatalf("topic after two runs: %+v", td["bench-named"])
	}
}
