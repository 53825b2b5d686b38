// Package reassign tests partition reassignment (KIP-455) and leader
// elections on request (KIP-460) on real `sluice serve` processes with
// real Kafka clients (franz-go's kadm): partitions added with an explicit
// assignment (CreatePartitions) placed as asked, a partition moved from
// brokers {1,2} to {2,3} under acks=all data, a preferred election bringing
// leadership back after a failover, and an unclean election of a live
// replica outside a dead ISR. The cluster is three voters and one
// broker-only node (4): the unclean case needs two replicas down while
// the metadata quorum keeps a majority.
package reassign

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

func TestReassignAndElect(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 4, Voters: 3, Props: map[string]string{
		"broker.session.timeout.ms":    "2000",
		"broker.heartbeat.interval.ms": "300",
		// Leadership moves back only when the test asks for it.
		"auto.leader.rebalance.enable": "false",
	}})
	t.Run("create-partitions", func(t *testing.T) { createPartitionsAssigned(t, c) })
	t.Run("bad", func(t *testing.T) { badReassignments(t, c) })
	t.Run("move", func(t *testing.T) { move(t, c) })
	t.Run("preferred", func(t *testing.T) { preferred(t, c) })
	t.Run("unclean", func(t *testing.T) { unclean(t, c) })
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitMeta waits until every node that is up reports partition 0 of topic
// as cond accepts it.
func waitMeta(t *testing.T, c *testcluster.Cluster, topic, desc string, cond func(testcluster.PartitionMeta) bool) testcluster.PartitionMeta {
	t.Helper()
	var last testcluster.PartitionMeta
	testcluster.WaitFor(t, 20*time.Second, desc, func() (bool, string) {
		all, err := c.MetaAll(topic)
		if err != nil {
			return false, err.Error()
		}
		for id, m := range all {
			if last = m[0]; !cond(last) {
				return false, fmt.Sprintf("node %d: %v", id, last)
			}
		}
		return true, ""
	})
	return last
}

func move(t *testing.T, c *testcluster.Cluster) {
	const topic = "moved"
	c.CreateTopic(topic, 1, -1, nil, [][]int32{{1, 2}})
	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	ctx := ctxFor(t, 40*time.Second)
	acked := map[string]testcluster.Ack{}
	var recs []*kgo.Record
	for i := range 1000 {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%04d", i))})
	}
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			t.Fatalf("produce: %v", r.Err)
		}
		acked[string(r.Record.Value)] = testcluster.Ack{Partition: r.Record.Partition, Offset: r.Record.Offset}
	}
	adm := c.Admin()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{2, 3})
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil || resps.Error() != nil {
		t.Fatalf("AlterPartitionAssignments: %v %v", err, resps.Error())
	}
	testcluster.WaitFor(t, 30*time.Second, "no reassignment in progress", func() (bool, string) {
		set := kadm.TopicsSet{}
		set.Add(topic, 0)
		l, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			return false, err.Error()
		}
		if len(l) > 0 {
			return false, fmt.Sprintf("%+v", l)
		}
		return true, ""
	})
	m := waitMeta(t, c, topic, "replicas [2 3] in sync", func(m testcluster.PartitionMeta) bool {
		return slices.Equal(m.Replicas, []int32{2, 3}) && slices.Equal(m.ISR, []int32{2, 3}) && m.Leader == 2
	})
	t.Logf("after the move: %v", m)
	// Broker 1 no longer hosts the partition: its replica is deleted.
	dir := filepath.Join(c.Node(1).DataDir(), topic+"-0")
	testcluster.WaitFor(t, 10*time.Second, "broker 1 deletes its replica", func() (bool, string) {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist), fmt.Sprint(err)
	})
	// Every acknowledged record, at its offset, from the new leader.
	testcluster.CheckAcked(t, "after the move", acked, c.ConsumeAll(topic, 1, 20*time.Second))
}

func preferred(t *testing.T, c *testcluster.Cluster) {
	const topic = "pref"
	c.CreateTopic(topic, 1, -1, nil, [][]int32{{1, 2, 3}})
	adm := c.Admin()
	ctx := ctxFor(t, 40*time.Second)
	set := kadm.TopicsSet{}
	set.Add(topic, 0)
	c.Node(1).Kill()
	waitMeta(t, c, topic, "failover away from 1", func(m testcluster.PartitionMeta) bool { return m.Leader == 2 || m.Leader == 3 })
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil {
		t.Fatal(err)
	}
	if e := res[topic][0].Err; !errors.Is(e, kerr.PreferredLeaderNotAvailable) {
		t.Fatalf("preferred election with 1 down: %v", e)
	}
	c.Node(1).Restart()
	m := waitMeta(t, c, topic, "1 back in the ISR", func(m testcluster.PartitionMeta) bool { return slices.Contains(m.ISR, 1) })
	if m.Leader == 1 {
		t.Fatalf("leadership moved back without an election: %v", m)
	}
	res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil || res[topic][0].Err != nil {
		t.Fatalf("preferred election: %v %v", err, res[topic][0].Err)
	}
	waitMeta(t, c, topic, "1 leads again", func(m testcluster.PartitionMeta) bool { return m.Leader == 1 })
	res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
	if err != nil || !errors.Is(res[topic][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("second preferred election: %v %v", err, res[topic][0].Err)
	}
}

func unclean(t *testing.T, c *testcluster.Cluster) {
	const topic = "dirty"
	c.CreateTopic(topic, 1, -1, nil, [][]int32{{4, 2}})
	adm := c.Admin()
	ctx := ctxFor(t, 50*time.Second)
	set := kadm.TopicsSet{}
	set.Add(topic, 0)
	// 2 fails: fenced, it leaves the ISR. Then 4, the last ISR member,
	// fails: it leaves the ISR into the ELR (KIP-966) and the partition
	// has no leader.
	c.Node(2).Kill()
	waitMeta(t, c, topic, "ISR {4}", func(m testcluster.PartitionMeta) bool { return slices.Equal(m.ISR, []int32{4}) })
	c.Node(4).Kill()
	waitMeta(t, c, topic, "no leader", func(m testcluster.PartitionMeta) bool { return m.Leader == -1 })
	c.Node(2).Restart()
	testcluster.WaitFor(t, 20*time.Second, "broker 2 unfenced", func() (bool, string) {
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			return false, err.Error()
		}
		// 4 is preferred but down: never elected cleanly.
		if e := res[topic][0].Err; !errors.Is(e, kerr.PreferredLeaderNotAvailable) {
			t.Fatalf("preferred election of a dead replica: %v", e)
		}
		m, err := c.Meta(topic)
		return err == nil && m[0].Leader == -1, fmt.Sprint(m, err)
	})
	var res kadm.ElectLeadersResults
	testcluster.WaitFor(t, 20*time.Second, "an unclean election", func() (bool, string) {
		var err error
		res, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, set)
		if err != nil {
			return false, err.Error()
		}
		// ELIGIBLE_LEADERS_NOT_AVAILABLE until 2 is unfenced.
		e := res[topic][0].Err
		return e == nil, fmt.Sprint(e)
	})
	m := waitMeta(t, c, topic, "2 leads alone", func(m testcluster.PartitionMeta) bool {
		return m.Leader == 2 && slices.Equal(m.ISR, []int32{2})
	})
	t.Logf("after the unclean election: %v", m)
	res, err := adm.ElectLeaders(ctx, kadm.ElectLiveReplica, set)
	if err != nil || !errors.Is(res[topic][0].Err, kerr.ElectionNotNeeded) {
		t.Fatalf("unclean election with a leader: %v %v", err, res[topic][0].Err)
	}
	// The partition serves writes again.
	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after the unclean election: %v", err)
	}
}

// badReassignments: kadm's AlterPartitionAssignments with an unknown
// broker, a duplicate replica or an empty replica list gets
// INVALID_REPLICA_ASSIGNMENT for that partition, an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION, and nothing changes: the partitions keep
// their replicas and no reassignment is listed.
func badReassignments(t *testing.T, c *testcluster.Cluster) {
	c.CreateTopic("bad", 3, -1, nil, [][]int32{{1, 2}, {2, 3}, {3, 1}})
	adm := c.Admin()
	ctx := ctxFor(t, time.Minute)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("bad", 0, []int32{1, 42})
	req.Assign("bad", 1, []int32{2, 2})
	req.Assign("bad", 2, []int32{})
	req.Assign("no-such-topic", 0, []int32{1, 2})
	res, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for p, what := range map[int32]string{0: "an unknown broker", 1: "a duplicate replica", 2: "no replicas"} {
		if e := res["bad"][p].Err; !errors.Is(e, kerr.InvalidReplicaAssignment) {
			t.Errorf("reassigning to %s: %v, want INVALID_REPLICA_ASSIGNMENT", what, e)
		}
	}
	if e := res["no-such-topic"][0].Err; !errors.Is(e, kerr.UnknownTopicOrPartition) {
		t.Errorf("reassigning an unknown topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", e)
	}
	ls, err := adm.ListPartitionReassignments(ctx, nil)
	if err != nil || len(ls) != 0 {
		t.Errorf("reassignments after refused requests: %v %v", ls, err)
	}
	m, err := c.Meta("bad")
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range [][]int32{{1, 2}, {2, 3}, {3, 1}} {
		if !slices.Equal(m[int32(p)].Replicas, want) {
			t.Errorf("bad-%d replicas %v after refused requests, want %v", p, m[int32(p)].Replicas, want)
		}
	}
}
