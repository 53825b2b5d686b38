package firsthour

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/testproc"
)

// TestStartupLogSummary: a restart that opens many partitions logs one
// summary line ("partitions opened n=…") and no per-partition INFO line.
func TestStartupLogSummary(t *testing.T) {
	p := testproc.Start(t, testproc.Options{})
	adm := kadm.NewClient(p.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 12, 1, nil, "many"); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	p.Restart()
	log := p.LogTail(10000)
	restart := log[strings.LastIndex(log, "=== testproc: start #2"):]
	if !regexp.MustCompile(`level=INFO msg="partitions opened" n=12 workers=\d+ took=\S+`).MatchString(restart) {
		t.Errorf("no summary line for the 12 partitions:\n%s", restart)
	}
	if strings.Contains(restart, `level=INFO msg="partition leadership"`) {
		t.Errorf("per-partition INFO lines at start:\n%s", restart)
	}
}

// TestVersion: `sluice version` prints a real version, not a placeholder.
func TestVersion(t *testing.T) {
	out, err := exec.Command(testproc.Build(t), "version").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sluice (v\d+\.\d+\.\d+\S*|devel .+)\n$`).Match(out) {
		t.Errorf("sluice version: %q", out)
	}
}

// TestBrokerWithoutQuorumWarns: a broker-only node whose voters are not
// running warns that it cannot reach its quorum (every 10 s) instead of
// only saying "sluice serving", and SIGTERM stops it at once.
func TestBrokerWithoutQuorumWarns(t *testing.T) {
	ports, err := testproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	voters := "1@127.0.0.1:" + strconv.Itoa(ports[0]) // nobody listens there
	p := testproc.Start(t, testproc.Options{NodeID: 5, ExtraArgs: []string{"--voters", voters}})
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(p.LogTail(100), "cannot reach the controller quorum") {
		if time.Now().After(deadline) {
			t.Fatalf("no quorum warning after 15 s:\n%s", p.LogTail(40))
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := signalAndWait(t, p, syscall.SIGTERM, 5*time.Second)
	t.Logf("SIGTERM of a never-registered broker: exited after %v", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("a broker that never registered took %v to stop", took)
	}
}
