package transactions

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestMain runs this test binary as an ETL group member when
// SLUICE_ETL_MEMBER names one (TestExactlyOnceETL starts them as processes
// so that one can be killed with SIGKILL).
func TestMain(m *testing.M) {
	if id := os.Getenv("SLUICE_ETL_MEMBER"); id != "" {
		if err := etlMember(id, strings.Split(os.Getenv("SLUICE_ETL_BROKERS"), ",")); err != nil {
			fmt.Fprintln(os.Stderr, "etl member:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// etlMember is one member of the consume-transform-produce group: a
// franz-go GroupTransactSession reading etl-in read_committed and writing
// "out-<value>" to etl-out, each poll in one transaction with its offsets
// (Kafka Streams' exactly-once loop), until killed.
func etlMember(id string, brokers []string) error {
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(brokers...), kgo.TransactionalID("etl-"+id),
		kgo.ConsumerGroup("etl"), kgo.ConsumeTopics("etl-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic("etl-out"), kgo.SessionTimeout(6*time.Second), kgo.TransactionTimeout(10*time.Second),
		kgo.FetchMaxBytes(1<<20), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	for {
		fs := s.PollFetches(ctx)
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return err
		}
		fs.EachRecord(func(r *kgo.Record) {
			s.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("out-"), r.Value...)}, nil)
		})
		if _, err := s.End(ctx, kgo.TryCommit); err != nil {
			fmt.Fprintln(os.Stderr, "etl member", id, "end:", err)
		}
	}
}

// TestExactlyOnceETL: 100,000 records go through a two-member
// consume-transform-produce group (GroupTransactSession, each member a
// process) on a 3-node cluster with RF 3; one member is killed with
// SIGKILL mid-run and a new one joins. Every input appears exactly once in
// the output under read_committed.
func TestExactlyOnceETL(t *testing.T) {
	const n = 100_000
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{
		"transaction.state.log.num.partitions":                        "3",
		"offsets.topic.num.partitions":                                "3",
		"group.initial.rebalance.delay.ms":                            "0",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
		"auto.leader.rebalance.enable":                                "false",
	}})
	c.CreateTopic("etl-in", 6, 3, map[string]string{"min.insync.replicas": "2"}, nil)
	c.CreateTopic("etl-out", 6, 3, map[string]string{"min.insync.replicas": "2"}, nil)

	// The input, produced and acknowledged before the group starts.
	p := c.Client(kgo.DefaultProduceTopic("etl-in"), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx := tctx(t, 5*time.Minute)
	for i := 0; i < n; i++ {
		p.Produce(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 64)), Value: []byte(fmt.Sprintf("v%06d", i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	brokers := strings.Join(c.Addrs(true), ",")
	start := func(id string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "SLUICE_ETL_MEMBER="+id, "SLUICE_ETL_BROKERS="+brokers)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	m1 := start("m1")
	start("m2")

	adm := kadm.NewClient(c.Client())
	outEnd := func() int64 {
		ends, err := adm.ListEndOffsets(ctx, "etl-out")
		if err != nil {
			return 0
		}
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		return sum
	}
	testcluster.WaitFor(t, 3*time.Minute, "a third of the output", func() (bool, string) {
		e := outEnd()
		return e >= n/3, fmt.Sprintf("output end %d", e)
	})
	t.Logf("killing member m1 (pid %d) at output end %d", m1.Process.Pid, outEnd())
	m1.Process.Kill()
	start("m3")

	// Read the output read_committed until every input is there.
	got := map[string]int{}
	cl := c.Client(kgo.ConsumeTopics("etl-out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	total := 0
	testcluster.WaitFor(t, 4*time.Minute, "every input in the output", func() (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++; total++ })
		cancel()
		return len(got) >= n, fmt.Sprintf("%d distinct of %d, %d records", len(got), n, total)
	})
	// A little longer, for a late duplicate.
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	for pctx.Err() == nil {
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++; total++ })
	}
	cancel()
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("out-v%06d", i)
		if got[v] != 1 {
			t.Errorf("%s appears %d times in the committed output", v, got[v])
		}
	}
	if total != n {
		t.Errorf("%d records in the committed output, want %d", total, n)
	}
	uncommitted := 0
	ucl := c.Client(kgo.ConsumeTopics("etl-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	pctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	for pctx.Err() == nil {
		uncommitted += ucl.PollFetches(pctx).NumRecords()
	}
	cancel()
	t.Logf("committed output: %d records, each input once; read_uncommitted sees %d (aborted work of the killed member included)", total, uncommitted)
}
