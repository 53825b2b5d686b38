// Package elr runs real `sluice serve` processes through KIP-966's
// scenario: a partition whose ISR shrank below min.insync.replicas keeps
// the replicas that left it as eligible leader replicas, and one of them
// leads again when it alone comes back, losing nothing acknowledged; one
// that comes back with a wiped data directory is not elected.
package elr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

const topic = "elr"

// world is a five-node cluster (voters 1-3) with topic "elr", one
// partition on [3,4,5] with min.insync.replicas 2.
type world struct {
	t     *testing.T
	c     *testcluster.Cluster
	acked map[string]testcluster.Ack
	n     int
}

func start(t *testing.T) *world {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 5, Voters: 3, Props: map[string]string{
		"auto.create.topics.enable":    "false",
		"broker.session.timeout.ms":    "3000",
		"broker.heartbeat.interval.ms": "500",
	}})
	c.CreateTopic(topic, 1, 3, map[string]string{"min.insync.replicas": "2"}, [][]int32{{3, 4, 5}})
	return &world{t: t, c: c, acked: map[string]testcluster.Ack{}}
}

// produce writes n records with acks=all through the voters (which stay
// up) and records the acknowledged ones.
func (w *world) produce(n int) {
	w.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.c.Node(1).Addr(), w.c.Node(2).Addr()), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(5))
	if err != nil {
		w.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range n {
		w.n++
		v := fmt.Sprintf("elr-%06d", w.n)
		r, err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).First()
		if err != nil {
			w.t.Fatalf("produce %s: %v", v, err)
		}
		w.acked[v] = testcluster.Ack{Partition: r.Partition, Offset: r.Offset}
	}
}

// describe is DescribeTopicPartitions (API 75) of the partition, asked
// of voter 1.
func (w *world) describe() kmsg.DescribeTopicPartitionsResponseTopicPartition {
	w.t.Helper()
	cl := w.c.Node(1).Client(w.t)
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		w.t.Fatalf("DescribeTopicPartitions: %v %+v", err, resp)
	}
	return resp.Topics[0].Partitions[0]
}

func fmtPart(p kmsg.DescribeTopicPartitionsResponseTopicPartition) string {
	return fmt.Sprintf("leader %d epoch %d isr %v elr %v last known %v", p.LeaderID, p.LeaderEpoch, p.ISR, p.EligibleLeaderReplicas, p.LastKnownELR)
}

// waitState waits until the partition, as voter 1 describes it, has
// leader and ISR (sorted).
func (w *world) waitState(timeout time.Duration, leader int32, isr ...int32) time.Duration {
	w.t.Helper()
	return testcluster.WaitFor(w.t, timeout, fmt.Sprintf("leader %d ISR %v", leader, isr), func() (bool, string) {
		p := w.describe()
		got := slices.Sorted(slices.Values(p.ISR))
		return p.LeaderID == leader && slices.Equal(got, isr), fmtPart(p)
	})
}

// killAll takes the partition's replicas down as the issue does: 5, then
// 4 (ISR {3}: 4 joins the ELR), then 3 (ISR empty, ELR {3,4}), with
// acknowledged records at each step.
func (w *world) killAll() {
	w.t.Helper()
	w.produce(50)
	w.c.Node(5).Kill()
	w.waitState(30*time.Second, 3, 3, 4)
	w.produce(50)
	// The followers learn the HW from their next fetch responses and
	// checkpoint it every 5 s (replication-offset-checkpoint). A leader
	// elected from the ELR starts from the HW it checkpointed, and with
	// an ISR below min.insync.replicas its HW cannot advance (KIP-966, as
	// in Kafka): records acknowledged after its last checkpoint are kept
	// but served only once the ISR is back at min.insync.replicas. Wait
	// for a checkpoint so that node 4 alone serves every record.
	time.Sleep(6 * time.Second)
	w.c.Node(4).Kill()
	w.waitState(30*time.Second, 3, 3)
	if p := w.describe(); !slices.Equal(p.EligibleLeaderReplicas, []int32{4}) {
		w.t.Fatalf("ISR {3} below min ISR 2: want ELR [4]: %s", fmtPart(p))
	}
	w.c.Node(3).Kill()
	w.waitState(30*time.Second, -1)
	p := w.describe()
	if !slices.Equal(slices.Sorted(slices.Values(p.EligibleLeaderReplicas)), []int32{3, 4}) || !slices.Equal(p.LastKnownELR, []int32{3}) {
		w.t.Fatalf("every replica down: want ELR [3 4], last known leader 3: %s", fmtPart(p))
	}
	w.t.Logf("all replicas down: %s", fmtPart(p))
	w.checkTools([]int32{3, 4}, []int32{3})
}

// checkTools checks that `sluice topic describe` and the console's
// /api/v1/partitions (voter 1's) show the partition's ELR and last known
// leader. The CLI may ask any broker, whose metadata image can trail
// voter 1's by a few milliseconds, so it waits until they agree.
func (w *world) checkTools(elr, lastKnown []int32) {
	w.t.Helper()
	testcluster.WaitFor(w.t, 10*time.Second, "tools show the ELR", func() (bool, string) {
		msg := w.toolsDiffer(elr, lastKnown)
		return msg == "", msg
	})
}

// toolsDiffer is what the tools show that differs from the wanted ELR
// and last known leader, or "".
func (w *world) toolsDiffer(elr, lastKnown []int32) string {
	w.t.Helper()
	out, err := exec.Command(testproc.Build(w.t), "topic", "describe", topic, "--bootstrap="+w.c.Node(1).Addr(), "--json").Output()
	if err != nil {
		w.t.Fatalf("sluice topic describe: %v %s", err, out)
	}
	var desc struct {
		Topics []struct {
			Partitions []struct {
				ELR          []int32 `json:"elr"`
				LastKnownELR []int32 `json:"last_known_elr"`
			} `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(out, &desc); err != nil || len(desc.Topics) != 1 || len(desc.Topics[0].Partitions) != 1 {
		w.t.Fatalf("sluice topic describe --json: %v\n%s", err, out)
	}
	if d := desc.Topics[0].Partitions[0]; !sameSet(d.ELR, elr) || !slices.Equal(d.LastKnownELR, lastKnown) {
		return fmt.Sprintf("sluice topic describe shows ELR %v last known %v, want %v %v", d.ELR, d.LastKnownELR, elr, lastKnown)
	}
	resp, err := http.Get("http://" + w.c.Node(1).HTTPAddr() + "/api/v1/partitions")
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var parts []struct {
		Topic        string  `json:"topic"`
		ELR          []int32 `json:"elr"`
		LastKnownELR []int32 `json:"lastKnownElr"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&parts); err != nil {
		w.t.Fatal(err)
	}
	for _, p := range parts {
		if p.Topic == topic && (!sameSet(p.ELR, elr) || !slices.Equal(p.LastKnownELR, lastKnown)) {
			return fmt.Sprintf("/api/v1/partitions shows ELR %v last known %v, want %v %v", p.ELR, p.LastKnownELR, elr, lastKnown)
		}
	}
	return ""
}

func sameSet(a, b []int32) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// readBack consumes the partition and checks every acknowledged record.
func (w *world) readBack(what string) {
	w.t.Helper()
	read := w.c.ConsumeAll(topic, 1, time.Minute)
	testcluster.CheckAcked(w.t, what, w.acked, read)
	w.t.Logf("%s: %d acknowledged records read back at their offsets", what, len(w.acked))
}

// TestELRLeaderReturns is the scenario: with [3,4,5] down in the
// order 5, 4, 3, node 4 alone comes back and leads within seconds, with
// every acknowledged record; then 3 and 5 return, and nothing is lost.
func TestELRLeaderReturns(t *testing.T) {
	w := start(t)
	w.killAll()
	w.c.Node(4).Restart()
	took := w.waitState(30*time.Second, 4, 4)
	t.Logf("node 4 leads %v after its restart returned", took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Fatalf("node 4 took %v to lead", took)
	}
	w.readBack("node 4 alone")
	w.c.Node(3).Restart()
	w.c.Node(5).Restart()
	w.waitState(60*time.Second, 4, 3, 4, 5)
	w.produce(20)
	w.readBack("3 and 5 back")
}

// TestELRWipedReplicaNotElected: node 4, in the ELR, comes back with its
// data directory wiped (a new directory id, no recorded broker epoch). It
// registers unclean, leaves the ELR and is not elected; node 3 (the other
// ELR member) is, when it returns, with every acknowledged record.
func TestELRWipedReplicaNotElected(t *testing.T) {
	w := start(t)
	w.killAll()
	wipe(t, w.c.Node(4).DataDir())
	w.c.Node(4).Restart()
	testcluster.WaitFor(t, 30*time.Second, "wiped node 4 out of the ELR", func() (bool, string) {
		p := w.describe()
		return slices.Equal(p.EligibleLeaderReplicas, []int32{3}), fmtPart(p)
	})
	// 4 is registered and unfenced: any election would have happened.
	time.Sleep(5 * time.Second)
	if p := w.describe(); p.LeaderID != -1 {
		t.Fatalf("a wiped ELR member must not be elected: %s", fmtPart(p))
	}
	w.c.Node(3).Restart()
	// Node 4, empty and unfenced, may catch up from 3 and rejoin the ISR
	// before the first describe: either ISR is right.
	testcluster.WaitFor(t, 30*time.Second, "node 3 leads", func() (bool, string) {
		p := w.describe()
		return p.LeaderID == 3 && slices.Contains(p.ISR, 3), fmtPart(p)
	})
	w.readBack("node 3 back")
	w.c.Node(5).Restart()
	w.waitState(60*time.Second, 3, 3, 4, 5)
	w.readBack("4 and 5 caught up")
}

// wipe removes everything in dir, as a replaced disk.
func wipe(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}
