// Package tieredstore holds the real-process tests of tiered storage's
// object store: a 3-node cluster pointed at the S3 test server
// (testproc.StartS3) by its broker settings.
package tieredstore

import (
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// waitLog waits for a line of p's log that contains every one of want.
func waitLog(t *testing.T, p *testproc.Proc, timeout time.Duration, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(p.LogPath())
		for _, line := range strings.Split(string(b), "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return
			}
		}
	}
	t.Fatalf("%s: no log line with %q\n%s", p.Name(), want, p.LogTail(30))
}

// TestClusterOnObjectStore: three `sluice serve` processes with
// remote.log.storage.system.enable=true and the S3 test server as their
// object store each find the bucket at start; a topic with
// remote.storage.enable=true takes acks=all writes and reads them back;
// with the object store gone, a restarted broker still starts, serves and
// logs the alarm, and no acknowledged write is lost.
func TestClusterOnObjectStore(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	s3 := testproc.StartS3(t)
	props := map[string]string{"default.replication.factor": "3", "min.insync.replicas": "2"}
	maps.Copy(props, s3.BrokerProps(""))
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	for _, p := range c.Nodes() {
		waitLog(t, p, 30*time.Second, "remote storage reachable", "s3://"+s3.Bucket+"/ at "+s3.Endpoint)
	}
	c.CreateTopic("tiered", 3, 3, map[string]string{"remote.storage.enable": "true", "segment.bytes": "65536"}, nil)
	c.WaitTopicReady("tiered", 3, 30*time.Second)
	lg := c.StartLoad("tiered", testcluster.LoadOptions{Partitions: []int32{0, 1, 2}, Rate: 500})
	time.Sleep(2 * time.Second)

	s3.Stop()
	c.Node(2).Restart()
	waitLog(t, c.Node(2), 30*time.Second, "level=ERROR", "remote storage unavailable", "unreachable")
	c.WaitTopicReady("tiered", 3, 30*time.Second)
	time.Sleep(2 * time.Second)
	lg.Stop(30 * time.Second)
	if len(lg.Acked()) == 0 {
		t.Fatal("nothing acknowledged")
	}
	testcluster.CheckAcked(t, "with the object store gone", lg.Acked(), c.ConsumeAll("tiered", 3, time.Minute))
}
