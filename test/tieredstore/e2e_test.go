package tieredstore

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

const (
	e2eTopic  = "tiered"
	e2ePlain  = "untiered"
	e2eRecLen = 1024
)

// e2e is the state of TestTieredEndToEnd: the cluster, what was written
// (in log order, aborted records included) and the sizes.
type e2e struct {
	t        *testing.T
	c        *testcluster.Cluster
	written  []rec
	seq      int64
	segBytes int64
	localMax int64
}

// produce writes n plain records to topic with acks=all, idempotently,
// and returns how long it took; the records are in log order after it.
func (e *e2e) produce(topic string, n int64, record bool) time.Duration {
	e.t.Helper()
	cl := e.c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(8192), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	for range n {
		r := rec{'p', e.seq}
		e.seq++
		if record {
			e.written = append(e.written, r)
		}
		cl.Produce(ctx, &kgo.Record{Value: value(r, e2eRecLen)}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		e.t.Fatal(err)
	}
	select {
	case err := <-errc:
		e.t.Fatalf("produce to %s: %v", topic, err)
	default:
	}
	cl.Close()
	return time.Since(start)
}

// transactions writes txns transactions of per records each, committing
// the even ones and aborting the odd ones.
func (e *e2e) transactions(txns, per int) {
	e.t.Helper()
	cl := e.c.Client(kgo.DefaultProduceTopic(e2eTopic), kgo.TransactionalID("e2e-txn"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range txns {
		if err := cl.BeginTransaction(); err != nil {
			e.t.Fatal(err)
		}
		kind := byte('c')
		if i%2 == 1 {
			kind = 'a'
		}
		for range per {
			r := rec{kind, e.seq}
			e.seq++
			e.written = append(e.written, r)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value(r, e2eRecLen)}).FirstErr(); err != nil {
				e.t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(kind == 'c')); err != nil {
			e.t.Fatal(err)
		}
	}
	cl.Close()
}

// waitTiered waits until the leader's earliest local offset is past
// offset, that is until everything below it was copied and deleted
// locally, and returns the earliest local offset.
func (e *e2e) waitTiered(offset int64, timeout time.Duration) int64 {
	e.t.Helper()
	cl := e.c.Client()
	var local int64
	testcluster.WaitForEvery(e.t, 500*time.Millisecond, timeout, fmt.Sprintf("the earliest local offset past %d", offset), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		local, err = listOffset(ctx, cl, e2eTopic, 0, -4)
		if err != nil {
			return false, err.Error()
		}
		return local > offset, fmt.Sprintf("earliest local %d", local)
	})
	return local
}

// readBack reads the partition from offset 0 to its end with
// read_committed through a client seeded with addrs, checks it is
// exactly the committed records written, in order, byte for byte, and
// returns the MB/s of the records below localStart and of those at or
// above it, and the offset and timestamp of each record read.
func (e *e2e) readBack(what string, addrs []string, localStart int64) (remoteMBs, localMBs float64, read []offTS) {
	e.t.Helper()
	var want []rec
	for _, r := range e.written {
		if r.kind != 'a' {
			want = append(want, r)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e2eTopic: {0: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxBytes(8<<20), kgo.FetchMaxPartitionBytes(4<<20))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	var boundary time.Time
	var remoteBytes, localBytes int64
	i := 0
	lastOffset := int64(-1)
	for i < len(want) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			e.t.Fatalf("%s: read %d of %d records: %v", what, i, len(want), err)
		}
		for _, fe := range fs.Errors() {
			e.t.Logf("%s: fetch error (retried): %v", what, fe.Err)
		}
		for _, r := range fs.Records() {
			if r.Offset <= lastOffset {
				e.t.Fatalf("%s: offset %d after %d", what, r.Offset, lastOffset)
			}
			lastOffset = r.Offset
			read = append(read, offTS{r.Offset, r.Timestamp.UnixMilli()})
			if i >= len(want) {
				e.t.Fatalf("%s: record at offset %d past the %d written: %.20q", what, r.Offset, len(want), r.Value)
			}
			if exp := value(want[i], e2eRecLen); string(r.Value) != string(exp) {
				e.t.Fatalf("%s: record %d (offset %d) is %.20q, want %.20q", what, i, r.Offset, r.Value, exp)
			}
			if r.Offset < localStart {
				remoteBytes += int64(len(r.Value))
			} else {
				if boundary.IsZero() {
					boundary = time.Now()
				}
				localBytes += int64(len(r.Value))
			}
			i++
		}
	}
	end := time.Now()
	if boundary.IsZero() {
		boundary = end
	}
	const mb = 1 << 20
	remoteMBs = float64(remoteBytes) / mb / boundary.Sub(start).Seconds()
	localMBs = float64(localBytes) / mb / max(end.Sub(boundary).Seconds(), 1e-3)
	e.t.Logf("%s: %d records read back byte for byte (%d aborted left out); remote part %d MiB at %.1f MB/s, local part %d MiB at %.1f MB/s",
		what, i, len(e.written)-len(want), remoteBytes/mb, remoteMBs, localBytes/mb, localMBs)
	// Nothing after the end.
	fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
	defer fcancel()
	for _, r := range cl.PollFetches(fctx).Records() {
		e.t.Fatalf("%s: an extra record at offset %d: %.20q", what, r.Offset, r.Value)
	}
	return remoteMBs, localMBs, read
}

// leader is the partition's leader.
func (e *e2e) leader() int32 {
	e.t.Helper()
	var l int32
	testcluster.WaitFor(e.t, 30*time.Second, "a leader", func() (bool, string) {
		m, err := e.c.Meta(e2eTopic)
		if err != nil {
			return false, err.Error()
		}
		l = m[0].Leader
		return l > 0, m[0].String()
	})
	return l
}

// leaderNot waits until the partition's leader is another node than
// killed (the Metadata of a node still naming a killed leader is stale)
// and returns it.
func (e *e2e) leaderNot(killed int32) int32 {
	e.t.Helper()
	var l int32
	testcluster.WaitFor(e.t, time.Minute, fmt.Sprintf("a leader other than node %d", killed), func() (bool, string) {
		m, err := e.c.Meta(e2eTopic)
		if err != nil {
			return false, err.Error()
		}
		l = m[0].Leader
		return l > 0 && l != killed, m[0].String()
	})
	return l
}

// partDirs are the partition's directories on each node.
func (e *e2e) partDirs() map[int]string {
	out := map[int]string{}
	for _, p := range e.c.Nodes() {
		out[p.NodeID()] = filepath.Join(p.DataDir(), e2eTopic+"-0")
	}
	return out
}

// diskBound is the local bound of a partition directory:
// local.retention.bytes, plus the active segment, the segment being
// copied and the indexes and snapshots (3 segments).
func (e *e2e) diskBound() int64 { return e.localMax + 3*e.segBytes }

// logDisk logs the largest size each node's partition directory reached.
func (e *e2e) logDisk(what string, seen map[int]int64) {
	e.t.Helper()
	for _, id := range slices.Sorted(maps.Keys(seen)) {
		e.t.Logf("%s: node %d: partition directory at most %.1f MiB (local.retention.bytes %.1f MiB, bound %.1f MiB)",
			what, id, float64(seen[id])/(1<<20), float64(e.localMax)/(1<<20), float64(e.diskBound())/(1<<20))
	}
}

// waitDisk waits until every running node's partition directory is
// within the bound, and logs the sizes.
func (e *e2e) waitDisk(what string) {
	e.t.Helper()
	dirs := e.partDirs()
	testcluster.WaitFor(e.t, time.Minute, what+": every partition directory within the bound", func() (bool, string) {
		ok, st := true, ""
		for _, p := range e.c.Nodes() {
			n := dirBytes(dirs[p.NodeID()])
			st += fmt.Sprintf(" node %d: %d;", p.NodeID(), n)
			ok = ok && n <= e.diskBound()
		}
		return ok, st
	})
	for _, p := range e.c.Nodes() {
		e.t.Logf("%s: node %d: partition directory %.1f MiB (bound %.1f MiB)", what, p.NodeID(),
			float64(dirBytes(dirs[p.NodeID()]))/(1<<20), float64(e.diskBound())/(1<<20))
	}
}

// TestTieredEndToEnd: 3 `sluice serve` processes, RF 3, on the S3 test
// server; a tiered topic with 1 MiB segments and a small
// local.retention.bytes gets SLUICE_TIERED_E2E_BYTES (default 64 MiB) of
// acks=all records, with committed and aborted transactions in the part
// that goes remote. Each broker's partition directory stays near the
// local bound; every record reads back from offset 0 (through the remote
// log) to the tail (local) with read_committed, byte for byte. The
// leader is SIGKILLed while copies run; a follower's data directory is
// then wiped and it restarts: it rebuilds from the remote metadata
// (its directory stays near the bound, it never copies the whole log)
// and the log reads back again, nothing lost, nothing twice. It also
// logs the throughput: remote vs local consume, and produce with uploads
// vs an untiered topic (docs/performance.md).
func TestTieredEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	total := envInt(t, "SLUICE_TIERED_E2E_BYTES", 64<<20)
	e := &e2e{t: t, segBytes: 1 << 20, localMax: envInt(t, "SLUICE_TIERED_E2E_LOCAL_BYTES", 8<<20)}
	s3 := testproc.StartS3(t)
	props := map[string]string{
		"default.replication.factor":          "3",
		"min.insync.replicas":                 "2",
		"auto.create.topics.enable":           "false",
		"remote.log.manager.task.interval.ms": "200",
	}
	maps.Copy(props, s3.BrokerProps(""))
	e.c = testcluster.Start(t, testcluster.Options{Nodes: 3, Props: props})
	for _, p := range e.c.Nodes() {
		waitLog(t, p, 30*time.Second, "remote storage reachable")
	}
	cfg := map[string]string{
		"segment.bytes":         fmt.Sprint(e.segBytes),
		"local.retention.bytes": fmt.Sprint(e.localMax),
		"remote.storage.enable": "true",
	}
	e.c.CreateTopic(e2eTopic, 1, 3, cfg, nil)
	plainCfg := maps.Clone(cfg)
	delete(plainCfg, "local.retention.bytes")
	plainCfg["remote.storage.enable"] = "false"
	e.c.CreateTopic(e2ePlain, 1, 3, plainCfg, nil)

	n := total / e2eRecLen
	disk := sampleDisk(e.partDirs())

	// Three quarters of the data in 6 chunks, transactions after the
	// second (so they end up in the remote log). Each chunk is followed
	// by as much to the untiered topic, so that the produce throughputs
	// with and without uploads are measured in the same conditions (the
	// load of a shared machine changes over a run).
	var tTiered, tPlain time.Duration
	m := n / 8
	for i := range 6 {
		tTiered += e.produce(e2eTopic, m, true)
		tPlain += e.produce(e2ePlain, m, false)
		if i == 1 {
			e.transactions(20, 50)
		}
	}
	produceTiered := float64(6*m*e2eRecLen) / (1 << 20) / tTiered.Seconds()
	producePlain := float64(6*m*e2eRecLen) / (1 << 20) / tPlain.Seconds()
	e.logDisk("while producing, before the leader kill (peak)", disk.Stop())
	disk = sampleDisk(e.partDirs())

	// The last quarter, during which the leader is SIGKILLed while a copy
	// is under way; the idempotent producer carries on with the new
	// leader.
	old := e.leader()
	lag := metric(e.c.Node(old), "sluice_remote_copy_lag_segments")
	caught := make(chan bool, 1)
	go func() { caught <- e.killMidCopy(s3, old, 2*time.Minute) }()
	e.produce(e2eTopic, n-6*m, true)
	cut := <-caught
	t.Logf("SIGKILLed leader node %d (%v segments waiting to be copied shortly before) with a copy under way; cut short (objects missing): %v", old, lag, cut)
	e.produce(e2eTopic, n/16, true)
	e.c.Node(old).Restart()
	e.c.WaitTopicReady(e2eTopic, 1, 2*time.Minute)
	local := e.waitTiered(int64(len(e.written))/2, 3*time.Minute)
	e.logDisk("around the leader kill, until copies caught up (peak)", disk.Stop())
	e.waitDisk("once copied")
	remoteMBs, localMBs, read := e.readBack("from offset 0", e.c.Addrs(true), local)
	e.checkTimestamps("from offset 0", read, local)

	// Wipe a follower: it rebuilds from the remote metadata.
	leader := e.leader()
	wiped := int32(1)
	for wiped == leader {
		wiped++
	}
	wp := e.c.Node(wiped)
	wp.Kill()
	wipe(t, wp.DataDir())
	disk = sampleDisk(map[int]string{int(wiped): e.partDirs()[int(wiped)]})
	wp.Restart()
	// Caught up: it rebuilt, and holds about what the leader holds (the
	// ISR may still list it from before the kill).
	waitLog(t, wp, 2*time.Minute, "follower rebuilt its log from the remote log")
	dirs := e.partDirs()
	testcluster.WaitFor(t, 3*time.Minute, "the wiped node caught up", func() (bool, string) {
		w, l := dirBytes(dirs[int(wiped)]), dirBytes(dirs[int(leader)])
		return w >= l-e.segBytes, fmt.Sprintf("wiped node %d: %d bytes, leader: %d", wiped, w, l)
	})
	e.c.WaitTopicReady(e2eTopic, 1, 3*time.Minute)
	time.Sleep(time.Second)
	seen := disk.Stop()
	e.logDisk("wiped follower rebuilding until caught up (peak)", seen)
	if seen[int(wiped)] > e.diskBound() {
		t.Errorf("the wiped node %d's partition directory reached %d bytes, above the bound %d: it copied more than the local log", wiped, seen[int(wiped)], e.diskBound())
	}
	if logCount(wp, "follower rebuilt its log from the remote log") == 0 {
		t.Errorf("node %d did not rebuild from the remote log\n%s", wiped, wp.LogTail(40))
	}
	e.produce(e2eTopic, n/16, true)
	e.c.WaitTopicReady(e2eTopic, 1, time.Minute)
	e.waitDisk("after the rebuild")
	// The wiped node leads: everything is read through it. The leader
	// is killed (and restarted once another leads) until it does.
	for l, tries := leader, 0; l != wiped; tries++ {
		if tries == 8 {
			t.Fatalf("node %d still leads, not the wiped node %d, after %d leader kills", l, wiped, tries)
		}
		e.c.WaitTopicReady(e2eTopic, 1, 2*time.Minute)
		e.c.Node(l).Kill()
		next := e.leaderNot(l)
		if next != wiped {
			e.c.Node(l).Restart()
		}
		l = next
	}
	local = e.waitTiered(0, time.Minute)
	if abandoned := e.checkRemote(s3); cut && abandoned == 0 {
		t.Errorf("the copy cut short was not cleaned up")
	}
	_, _, read = e.readBack(fmt.Sprintf("through the wiped node %d", wiped), []string{wp.Addr()}, local)
	e.checkTimestamps(fmt.Sprintf("through the wiped node %d", wiped), read, local)
	e.deleteRecords(s3, read, local)

	t.Logf("throughput: consume remote (cold, offset 0) %.1f MB/s vs local (tail) %.1f MB/s: ratio %.2f", remoteMBs, localMBs, remoteMBs/localMBs)
	t.Logf("throughput: produce with uploads %.1f MB/s vs remote.storage.enable=false %.1f MB/s: ratio %.2f", produceTiered, producePlain, produceTiered/producePlain)
}
