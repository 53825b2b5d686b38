package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testproc"
)

// singleNodeFrom is the earlier release whose single-node mode kept its
// metadata in a store of its own (__cluster_metadata/metadata.json)
// instead of a controller quorum of one. SLUICE_SINGLE_NODE_FROM names
// another commit.
const singleNodeFrom = "ff53b0a"

// TestSingleNodeUpgrade: a single node (no --voters) of the earlier
// binary gets topics with configs and records, committed group offsets,
// an ACL, a SCRAM user and a client quota; started again from this
// checkout's binary on the same data directory, it serves all of them
// (same topic ids, every record at its offset), takes new writes, keeps
// the old store renamed aside, and serves the same again after a second
// restart, from its controller quorum's log alone.
func TestSingleNodeUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an earlier binary and runs real processes")
	}
	from := singleNodeFrom
	if c := os.Getenv("SLUICE_SINGLE_NODE_FROM"); c != "" {
		from = c
	}
	old := buildOld(t, from)
	cfg := filepath.Join(t.TempDir(), "server.properties")
	props := strings.Join([]string{
		"auto.create.topics.enable=false",
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:ANONYMOUS",
	}, "\n") + "\n"
	if err := os.WriteFile(cfg, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.Start(t, testproc.Options{Binary: old, ExtraArgs: []string{"--config", cfg}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The earlier binary writes.
	adm := kadm.NewClient(p.Client(t))
	retention := "123456789"
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": &retention}, "orders"); err != nil {
		t.Fatal("create orders:", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		t.Fatal("create events:", err)
	}
	const perPart = 50
	cl := p.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for part := range int32(3) {
		for i := range perPart {
			r := &kgo.Record{Topic: "orders", Partition: part, Value: fmt.Appendf(nil, "orders-%d-%d", part, i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal("produce:", err)
			}
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "events", Value: []byte("e0")}).FirstErr(); err != nil {
		t.Fatal("produce:", err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 42, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "orders", Partition: 2, At: 7, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, "billing", offs); err != nil || r.Error() != nil {
		t.Fatal("commit offsets:", err, r.Error())
	}
	acl := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	if r, err := adm.CreateACLs(ctx, acl); err != nil || r[0].Err != nil {
		t.Fatal("create ACL:", err, r)
	}
	if r, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "secret"}}); err != nil || r.Error() != nil {
		t.Fatal("SCRAM user:", err, r.Error())
	}
	bob := "bob"
	if r, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: &bob}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}},
	}}); err != nil || r[0].Err != nil {
		t.Fatal("quota:", err, r)
	}
	before := describeAll(ctx, t, adm)
	cl.Close()
	adm.Close()
	p.Stop()

	// This checkout's binary reads everything back, twice.
	p.UseBinary(testproc.Build(t))
	for round := 1; round <= 2; round++ {
		p.Restart()
		adm := kadm.NewClient(p.Client(t))
		if after := describeAll(ctx, t, adm); after != before {
			t.Fatalf("start %d of the new binary: the metadata is\n%s\nwas\n%s", round, after, before)
		}
		for part := range int32(3) {
			got := consume(ctx, t, p, "orders", part, perPart+round-1)
			for i := range perPart {
				if want := fmt.Sprintf("orders-%d-%d", part, i); got[i] != want {
					t.Fatalf("start %d: orders-%d offset %d is %q, want %q", round, part, i, got[i], want)
				}
			}
		}
		// New writes land after the old ones, one per partition and round.
		ncl := p.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for part := range int32(3) {
			r := &kgo.Record{Topic: "orders", Partition: part, Value: fmt.Appendf(nil, "new-%d", round)}
			if err := ncl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("start %d: produce: %v", round, err)
			} else if r.Offset != int64(perPart+round-1) {
				t.Fatalf("start %d: new record at offset %d, want %d", round, r.Offset, perPart+round-1)
			}
		}
		ncl.Close()
		adm.Close()
		if _, err := os.Stat(filepath.Join(p.DataDir(), "__cluster_metadata", "metadata.json")); !os.IsNotExist(err) {
			t.Errorf("start %d: the old single-node store is still in use (stat: %v)", round, err)
		}
		if _, err := os.Stat(filepath.Join(p.DataDir(), "__cluster_metadata.migrated", "metadata.json")); err != nil {
			t.Errorf("start %d: the old single-node store was not kept aside: %v", round, err)
		}
		p.Stop()
	}
}

// describeAll renders what the node's metadata says about the test's
// topics (ids, partitions, configs set), group offsets, ACLs, SCRAM
// users and quotas, for comparison.
func describeAll(ctx context.Context, t *testing.T, adm *kadm.Client) string {
	t.Helper()
	var sb strings.Builder
	td, err := adm.ListTopics(ctx, "orders", "events")
	if err != nil || td.Error() != nil {
		t.Fatal("list topics:", err, td.Error())
	}
	for _, name := range td.Names() {
		d := td[name]
		fmt.Fprintf(&sb, "topic %s id %s partitions %d\n", name, d.ID, len(d.Partitions))
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal("topic configs:", err)
	}
	for _, r := range rc {
		for _, c := range r.Configs {
			if c.Source == 1 { // DYNAMIC_TOPIC_CONFIG
				fmt.Fprintf(&sb, "config %s %s=%s\n", r.Name, c.Key, c.MaybeValue())
			}
		}
	}
	fo, err := adm.FetchOffsets(ctx, "billing")
	if err != nil || fo.Error() != nil {
		t.Fatal("fetch offsets:", err, fo.Error())
	}
	for _, o := range fo.Sorted() {
		fmt.Fprintf(&sb, "offset billing %s-%d %d\n", o.Topic, o.Partition, o.At)
	}
	acls, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal("describe ACLs:", err)
	}
	var lines []string
	for _, r := range acls {
		if r.Err != nil {
			t.Fatal("describe ACLs:", r.Err)
		}
		for _, d := range r.Described {
			lines = append(lines, fmt.Sprintf("acl %s %s %s %s %s %s", d.Principal, d.Host, d.Type, d.Name, d.Operation, d.Permission))
		}
	}
	slices.Sort(lines)
	sb.WriteString(strings.Join(slices.Compact(lines), "\n") + "\n")
	us, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal("describe SCRAM users:", err)
	}
	for _, u := range us.Sorted() {
		for _, c := range u.CredInfos {
			fmt.Fprintf(&sb, "scram %s %s %d\n", u.User, c.Mechanism, c.Iterations)
		}
	}
	qs, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 2}})
	if err != nil {
		t.Fatal("describe quotas:", err)
	}
	for _, q := range qs {
		for _, v := range q.Values {
			fmt.Fprintf(&sb, "quota %v %s=%v\n", q.Entity, v.Key, v.Value)
		}
	}
	return sb.String()
}

// consume reads partition part of topic from the start until it has n
// records and returns their values by offset.
func consume(ctx context.Context, t *testing.T, p *testproc.Proc, topic string, part int32, n int) []string {
	t.Helper()
	cl := p.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	got := make([]string, n)
	seen := 0
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for seen < n {
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("%s-%d: read %d records of %d", topic, part, seen, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < int64(n) && got[r.Offset] == "" {
				got[r.Offset] = string(r.Value)
				seen++
			}
		})
	}
	return got
}
