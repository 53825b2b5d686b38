package compat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// The transactional tests run each client against a 3-node cluster: the
// topic has 3 partitions with replication factor 3, partition i led by node
// i+1, so one transaction spans three leaders and its markers travel
// between brokers. Every client runs the same plan (txnPlan): three
// transactions, committed, aborted, committed, each writing txnPerPartition
// records to every partition in order and, as a consume-transform-produce
// application does, committing one offset of the group txnGroup
// (AddOffsetsToTxn, TxnOffsetCommit): transaction si commits offset
// txnGroupOffset(si) for partition si of the topic. The last committed
// transaction lets a read_committed reader tell where the log ends: the
// final data record of each partition is then visible to it.

// txnProps are the broker settings of those clusters: few partitions for
// the internal topics, so they are created and elected quickly.
var txnProps = map[string]string{
	"transaction.state.log.num.partitions": "3",
	"offsets.topic.num.partitions":         "3",
	"auto.leader.rebalance.enable":         "false",
}

// txnPartitions is the number of partitions of the topic, txnPerPartition
// the records each transaction writes to each of them.
const (
	txnPartitions   = 3
	txnPerPartition = 10
)

// txnStep is one transaction of the plan: its name (part of its values)
// and whether the client commits it.
type txnStep struct {
	Name   string
	Commit bool
}

// txnPlan is what every client runs, in order.
var txnPlan = []txnStep{{"c1", true}, {"a1", false}, {"c2", true}}

// txnPlanArg is txnPlan as the external scripts take it: name:commit or
// name:abort, comma-separated.
func txnPlanArg() string {
	var parts []string
	for _, s := range txnPlan {
		verb := "abort"
		if s.Commit {
			verb = "commit"
		}
		parts = append(parts, s.Name+":"+verb)
	}
	return strings.Join(parts, ",")
}

// txnCounts are the records txnPlan writes in committed transactions and
// in all.
func txnCounts() (committed, all int) {
	for _, s := range txnPlan {
		if s.Commit {
			committed += txnPartitions * txnPerPartition
		}
		all += txnPartitions * txnPerPartition
	}
	return committed, all
}

// txnGroup is the consumer group whose offsets the transactions of txnID
// commit.
func txnGroup(txnID string) string { return txnID + "-group" }

// txnGroupOffset is the offset the si-th transaction of the plan commits
// for partition si of the topic; the scripts compute the same.
func txnGroupOffset(si int) int64 { return int64(100*(si+1) + si) }

// txnValue and txnKey are the value and key of record i of transaction
// step on partition p; the scripts build the same strings.
func txnValue(prefix, step string, p int32, i int) string {
	return fmt.Sprintf("%s-%s-p%d-%03d", prefix, step, p, i)
}

func txnKey(step string, p int32, i int) string {
	return fmt.Sprintf("%s-p%d-%03d", step, p, i)
}

// startTxnCluster starts a 3-node cluster; it is killed when the test
// ends.
func startTxnCluster(t *testing.T) *testcluster.Cluster {
	t.Helper()
	return testcluster.Start(t, testcluster.Options{Nodes: 3, Props: txnProps})
}

// createTxnTopic creates a topic named after t: 3 partitions, replication
// factor 3, partition i led by node i+1. The cluster's helpers fail the
// test that started it, so t must be that test.
func createTxnTopic(t *testing.T, c *testcluster.Cluster) string {
	t.Helper()
	topic := uniqueTopic(t)
	c.CreateTopic(topic, txnPartitions, 3, nil, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}})
	meta, err := c.Meta(topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	for p := range int32(txnPartitions) {
		if m := meta[p]; m.Leader != p+1 || len(m.ISR) != 3 {
			t.Fatalf("%s partition %d: %v, want leader %d and 3 replicas in sync", topic, p, m, p+1)
		}
	}
	return topic
}

// txnRecordOffset is where record i of the step-th transaction lands in
// every partition: each transaction's records follow the previous
// transaction's marker.
func txnRecordOffset(step, i int) int64 {
	return int64(step*(txnPerPartition+1) + i)
}

// checkTxnTopic checks what the client left in the topic after running
// txnPlan with transactional id txnID:
//   - each partition holds every transaction's records and one marker per
//     transaction (high watermark len(txnPlan)*(txnPerPartition+1)), and
//     the last stable offset reaches the high watermark;
//   - the coordinator reports the id CompleteCommit with the producer id
//     and epoch of the records;
//   - the group txnGroup(txnID) has exactly the offsets of the committed
//     transactions;
//   - a read_committed consumer sees exactly the committed records, each
//     once, at their offsets; a read_uncommitted one sees the aborted ones
//     too.
func checkTxnTopic(t *testing.T, c *testcluster.Cluster, topic, txnID, prefix string) {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	wantEnd := int64(len(txnPlan) * (txnPerPartition + 1))
	testcluster.WaitFor(t, 30*time.Second, "high watermark and last stable offset of every partition at "+fmt.Sprint(wantEnd), func() (bool, string) {
		hw, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		lso, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		ok := true
		var state []string
		for p := range int32(txnPartitions) {
			h, _ := hw.Lookup(topic, p)
			l, _ := lso.Lookup(topic, p)
			state = append(state, fmt.Sprintf("p%d hw=%d(%v) lso=%d(%v)", p, h.Offset, h.Err, l.Offset, l.Err))
			ok = ok && h.Err == nil && l.Err == nil && h.Offset == wantEnd && l.Offset == wantEnd
		}
		return ok, strings.Join(state, " ")
	})

	var desc kadm.DescribedTransaction
	testcluster.WaitFor(t, 30*time.Second, "transactional id "+txnID+" CompleteCommit", func() (bool, string) {
		d, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			return false, err.Error()
		}
		desc = d[txnID]
		return desc.Err == nil && desc.State == "CompleteCommit", fmt.Sprintf("%+v", desc)
	})

	// CompleteCommit: every marker is written, those of __consumer_offsets
	// included, so the offsets of the transactions are settled.
	fo, err := adm.FetchOffsets(ctx, txnGroup(txnID))
	if err != nil {
		t.Fatalf("FetchOffsets %s: %v", txnGroup(txnID), err)
	}
	gotOffs := map[int32]int64{}
	fo.Each(func(o kadm.OffsetResponse) {
		if o.Topic != topic || o.Err != nil {
			t.Errorf("FetchOffsets %s: %s[%d] at %d, error %v; want only topic %s without error", txnGroup(txnID), o.Topic, o.Partition, o.At, o.Err, topic)
			return
		}
		gotOffs[o.Partition] = o.At
	})
	wantOffs := map[int32]int64{}
	for si, s := range txnPlan {
		if s.Commit {
			wantOffs[int32(si%txnPartitions)] = txnGroupOffset(si)
		}
	}
	if !maps.Equal(gotOffs, wantOffs) {
		t.Errorf("group %s committed offsets %v, want %v (the committed transactions')", txnGroup(txnID), gotOffs, wantOffs)
	}

	committed := map[int32][]kgo.Record{}
	all := map[int32][]kgo.Record{}
	for p := range int32(txnPartitions) {
		for si, s := range txnPlan {
			for i := range txnPerPartition {
				r := kgo.Record{Partition: p, Offset: txnRecordOffset(si, i),
					Key: []byte(txnKey(s.Name, p, i)), Value: []byte(txnValue(prefix, s.Name, p, i))}
				all[p] = append(all[p], r)
				if s.Commit {
					committed[p] = append(committed[p], r)
				}
			}
		}
	}
	for _, rc := range []bool{true, false} {
		want, iso := all, "read_uncommitted"
		if rc {
			want, iso = committed, "read_committed"
		}
		got := consumeIsolated(t, c, topic, rc)
		for _, p := range slices.Sorted(maps.Keys(got)) {
			if _, ok := want[p]; !ok {
				t.Errorf("%s: partition %d has records, want none", iso, p)
			}
		}
		for p := range int32(txnPartitions) {
			g, w := got[p], want[p]
			if len(g) != len(w) {
				t.Errorf("%s: partition %d: %d records, want %d:\n%s", iso, p, len(g), len(w), describeRecords(g))
				continue
			}
			for i := range g {
				if g[i].Offset != w[i].Offset || string(g[i].Key) != string(w[i].Key) || string(g[i].Value) != string(w[i].Value) {
					t.Errorf("%s: partition %d record %d: offset %d key %q value %q, want offset %d key %q value %q",
						iso, p, i, g[i].Offset, g[i].Key, g[i].Value, w[i].Offset, w[i].Key, w[i].Value)
					break
				}
				if !g[i].Attrs.IsTransactional() || g[i].ProducerID != desc.ProducerID || g[i].ProducerEpoch != desc.ProducerEpoch {
					t.Errorf("%s: partition %d offset %d: transactional=%v producer id %d epoch %d, want transactional, id %d epoch %d (DescribeTransactions)",
						iso, p, g[i].Offset, g[i].Attrs.IsTransactional(), g[i].ProducerID, g[i].ProducerEpoch, desc.ProducerID, desc.ProducerEpoch)
					break
				}
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	nc, na := txnCounts()
	t.Logf("checked %s: high watermark %d per partition, producer id %d epoch %d, %d committed records visible to read_committed, %d in all, group offsets %v",
		topic, wantEnd, desc.ProducerID, desc.ProducerEpoch, nc, na, gotOffs)
}

// consumeIsolated reads every partition of topic from the start with
// franz-go at an isolation level until it has seen the record just below
// each partition's final marker (the last record of the last, committed,
// transaction), and returns the records per partition in the order read.
func consumeIsolated(t *testing.T, c *testcluster.Cluster, topic string, readCommitted bool) map[int32][]kgo.Record {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if readCommitted {
		iso = kgo.ReadCommitted()
	}
	offs := map[int32]kgo.Offset{}
	for p := range int32(txnPartitions) {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(true)...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(iso), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	last := txnRecordOffset(len(txnPlan)-1, txnPerPartition-1)
	out := map[int32][]kgo.Record{}
	done := map[int32]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(done) < txnPartitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			n := map[int32]int{}
			for p, rs := range out {
				n[p] = len(rs)
			}
			t.Fatalf("consume %s (read committed %v): partitions done %v before the timeout; records so far per partition: %v", topic, readCommitted, done, n)
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Fatalf("fetch %s[%d] (read committed %v): %v", tp, p, readCommitted, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], *r)
			if r.Offset >= last {
				done[r.Partition] = true
			}
		})
	}
	return out
}

func describeRecords(rs []kgo.Record) string {
	var sb strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&sb, "  @%d %s\n", r.Offset, r.Value)
	}
	return sb.String()
}

// waitGroupCoordinator waits until every node's FindCoordinator names the
// same node for group and that node answers OffsetFetch for it without
// error: __consumer_offsets exists, every node knows it, and the group's
// partition is loaded on its leader.
func waitGroupCoordinator(t *testing.T, c *testcluster.Cluster, group string) int32 {
	t.Helper()
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		t.Fatalf("Metadata: %v", err)
	}
	var coord int32
	testcluster.WaitFor(t, 30*time.Second, "group "+group+"'s coordinator named by every node and serving", func() (bool, string) {
		coord = -1
		var state []string
		for _, p := range c.Nodes() {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey, req.CoordinatorKeys = group, []string{group}
			resp, err := req.RequestWith(ctx, cl.Broker(p.NodeID()))
			if err != nil {
				return false, fmt.Sprintf("node %d: FindCoordinator: %v", p.NodeID(), err)
			}
			node, code := resp.NodeID, resp.ErrorCode
			if len(resp.Coordinators) > 0 {
				node, code = resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
			}
			state = append(state, fmt.Sprintf("node %d names %d (error %d)", p.NodeID(), node, code))
			if code != 0 || (coord != -1 && node != coord) {
				return false, strings.Join(state, "; ")
			}
			coord = node
		}
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl.Broker(int(coord)))
		if err != nil {
			return false, fmt.Sprintf("%s; OffsetFetch from %d: %v", strings.Join(state, "; "), coord, err)
		}
		code := resp.ErrorCode
		if len(resp.Groups) > 0 {
			code = resp.Groups[0].ErrorCode
		}
		return code == 0, fmt.Sprintf("%s; OffsetFetch from %d: error %d", strings.Join(state, "; "), coord, code)
	})
	return coord
}
