package handler_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/remote/remotetest"
	"github.com/sluice-io/sluice/internal/vfs"
)

// tieredNode is a node with remote storage: an in-memory object store and
// remote log metadata, filled by tier.
type tieredNode struct {
	*node
	store *objstore.Memory
	meta  *remote.MemMetadata
}

func startTiered(t *testing.T, props map[string]string) *tieredNode {
	t.Helper()
	return startTieredStore(t, props, nil)
}

// startTieredStore is startTiered with the broker reading the store
// through wrap (nil: directly).
func startTieredStore(t *testing.T, props map[string]string, wrap func(objstore.Store) objstore.Store) *tieredNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = ln.Addr().String()
	for k, v := range props {
		cfg.Props[k] = v
	}
	tn := &tieredNode{store: &objstore.Memory{}, meta: &remote.MemMetadata{}}
	var store objstore.Store = tn.store
	if wrap != nil {
		store = wrap(store)
	}
	b, err := broker.Open(broker.Options{Config: cfg, RemoteStore: store, RemoteMetadata: tn.meta})
	if err != nil {
		t.Fatal(err)
	}
	reg := protocol.NewRegistry()
	hs := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{}, reg)
	go srv.Serve(ln)
	tn.node = &node{t: t, dir: cfg.DataDir, addr: ln.Addr().String(), b: b, h: hs, srv: srv}
	t.Cleanup(tn.stop)
	return tn
}

// tier copies topic-0's sealed segments below half its log end to the
// remote store and deletes them locally; it returns the new local log
// start.
func (tn *tieredNode) tier(t *testing.T, topic string) int64 {
	t.Helper()
	p, err := tn.b.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	log := p.Log()
	below := log.LogEndOffset() / 2
	segs, err := remotetest.Upload(context.Background(), vfs.Default, log, tn.store, tn.meta, "", p.RemotePartition(), below)
	if err != nil || len(segs) == 0 {
		t.Fatalf("upload: %d segments, %v", len(segs), err)
	}
	if _, err := log.DeleteLocalBelow(below); err != nil {
		t.Fatal(err)
	}
	local := log.LocalLogStartOffset()
	if local == 0 || log.LogStartOffset() != 0 {
		t.Fatalf("log start %d, local start %d", log.LogStartOffset(), local)
	}
	return local
}

func tieredConfigs() map[string]*string {
	s := func(v string) *string { return &v }
	return map[string]*string{"remote.storage.enable": s("true"), "segment.bytes": s("3000"), "index.interval.bytes": s("200")}
}

type rec struct {
	off        int64
	key, value string
	ts         int64
}

func recsOf(rs []*kgo.Record) []rec {
	out := make([]rec, len(rs))
	for i, r := range rs {
		out[i] = rec{r.Offset, string(r.Key), string(r.Value), r.Timestamp.UnixMilli()}
	}
	return out
}

// fetchRaw fetches topic-0 at offset with one raw Fetch (and other, a
// second topic's partition 0, if not empty).
// Topics are named by id (kgo sends the highest version both sides
// support); the response's Topic names are filled back in.
func fetchRaw(t *testing.T, tn *tieredNode, cl *kgo.Client, topic string, offset int64, isolation int8, other string) kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	names := map[[16]byte]string{}
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 1 << 20
	req.IsolationLevel = isolation
	req.SessionEpoch = -1
	for _, tp := range []string{topic, other} {
		if tp == "" {
			continue
		}
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = tp
		id, ok := tn.b.TopicID(tp)
		if !ok {
			t.Fatalf("no topic id for %s", tp)
		}
		ft.TopicID = id
		names[id] = tp
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.FetchOffset = offset
		fp.PartitionMaxBytes = 1 << 20
		fp.CurrentLeaderEpoch = -1
		fp.LogStartOffset = -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
	}
	resp := request[*kmsg.FetchResponse](t, cl, req)
	if len(resp.Topics) != len(req.Topics) {
		t.Fatalf("%d topics in the response, %d asked", len(resp.Topics), len(req.Topics))
	}
	for i := range resp.Topics {
		if resp.Topics[i].Topic == "" {
			resp.Topics[i].Topic = names[resp.Topics[i].TopicID]
		}
	}
	return *resp
}

// TestTieredConsume: a consumer from offset 0 reads across the remote to
// local boundary exactly what was produced, the remote bytes are the bytes
// a local read gave before the segments left the disk, a missing remote
// object fails only its partition, and ListOffsets answers -2, -4, -5 and
// timestamps across both tiers.
func TestTieredConsume(t *testing.T) {
	tn := startTiered(t, nil)
	cl := tn.client()
	createTopic(t, cl, "tiered", 1, tieredConfigs())
	createTopic(t, cl, "local", 1, nil)
	const n = 400
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: "tiered", Key: []byte(fmt.Sprintf("k%d", i)), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 20+i%40)}
		if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "local", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := recsOf(consume(t, tn.node, "tiered", n))
	raw0 := fetchRaw(t, tn, cl, "tiered", 0, 0, "")
	// A timestamp in the first quarter, before tiering.
	tsWant := before[n/4].ts
	local := tn.tier(t, "tiered")

	after := recsOf(consume(t, tn.node, "tiered", n))
	if len(after) != len(before) {
		t.Fatalf("read %d records after tiering, %d before", len(after), len(before))
	}
	for i := range before {
		if after[i] != before[i] {
			t.Fatalf("record %d: %+v after tiering, %+v before", i, after[i], before[i])
		}
	}
	if _, _, cn, _ := tn.b.RemoteReader().CacheStats(); cn == 0 {
		t.Fatal("the consumer did not read the remote log")
	}
	// Byte for byte: the remote answer is a prefix of the local one (a
	// remote read returns one segment).
	raw1 := fetchRaw(t, tn, cl, "tiered", 0, 0, "")
	got, want := raw1.Topics[0].Partitions[0].RecordBatches, raw0.Topics[0].Partitions[0].RecordBatches
	if len(got) == 0 || !bytes.HasPrefix(want, got) {
		t.Fatalf("remote fetch: %d bytes, not a prefix of the %d local ones", len(got), len(want))
	}

	lo := listOffsets(t, cl, 9, "tiered", -2, -4, -5, tsWant)
	hi := tn.b.RemoteReader().HighestOffset(remotePart(t, tn, "tiered"))
	if lo[0] != 0 || lo[1] != local || lo[2] != hi || hi != local-1 {
		t.Fatalf("earliest %d, earliest local %d (want %d), latest tiered %d (want %d)", lo[0], lo[1], local, lo[2], local-1)
	}
	wantOff := int64(-1)
	for _, r := range before {
		if r.ts >= tsWant {
			wantOff = r.off
			break
		}
	}
	if lo[3] != wantOff || wantOff >= local {
		t.Fatalf("timestamp %d: offset %d, want %d in the remote log (local start %d)", tsWant, lo[3], wantOff, local)
	}
	if lo := listOffsets(t, cl, 9, "local", -4, -5); lo[0] != 0 || lo[1] != -1 {
		t.Fatalf("topic without remote storage: earliest local %d, latest tiered %d", lo[0], lo[1])
	}

}

// TestTieredMissingObject: a remote log object deleted behind the
// broker's back fails that partition's fetch with UNKNOWN_SERVER_ERROR
// (Kafka's answer to a RemoteStorageException); the other partition of
// the request answers its records, and the broker goes on.
func TestTieredMissingObject(t *testing.T) {
	tn := startTiered(t, nil)
	cl := tn.client()
	createTopic(t, cl, "tiered", 1, tieredConfigs())
	createTopic(t, cl, "local", 1, nil)
	for i := 0; i < 200; i++ {
		if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "tiered", Value: bytes.Repeat([]byte{'v'}, 50)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "local", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tn.tier(t, "tiered")
	seg, ok := tn.b.RemoteReader().FindSegment(remotePart(t, tn, "tiered"), nil, 0)
	if !ok {
		t.Fatal("no remote segment at 0")
	}
	if err := tn.store.Delete(context.Background(), remote.ObjectKey("", &seg, remote.FileLog)); err != nil {
		t.Fatal(err)
	}
	resp := fetchRaw(t, tn, cl, "tiered", 0, 0, "local")
	for _, rt := range resp.Topics {
		p := rt.Partitions[0]
		switch rt.Topic {
		case "tiered":
			if p.ErrorCode != kerr.UnknownServerError.Code {
				t.Fatalf("missing object: error %d", p.ErrorCode)
			}
		case "local":
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				t.Fatalf("the other partition: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
			}
		}
	}
	// The next segment still reads, and the broker still takes writes.
	next := fetchRaw(t, tn, cl, "tiered", seg.EndOffset+1, 0, "")
	if p := next.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("next segment: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
	if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "local", Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func remotePart(t *testing.T, tn *tieredNode, topic string) remote.Partition {
	p, err := tn.b.Partition(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p.RemotePartition()
}

// listOffsets asks topic-0's offsets for the timestamps with ListOffsets
// of version v.
func listOffsets(t *testing.T, cl *kgo.Client, v int16, topic string, ts ...int64) []int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(v)
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, x := range ts {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = x
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ListOffsetsResponse](t, cl, req)
	var out []int64
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("ListOffsets %s: %v", topic, kerr.ErrorForCode(p.ErrorCode))
		}
		out = append(out, p.Offset)
	}
	return out
}

// TestTieredReadCommitted: a read_committed consumer from offset 0 gets
// the same committed records across the remote to local boundary as it
// did before tiering, aborted transactions in the remote log filtered out
// by the aborted transactions the remote transaction indexes give.
func TestTieredReadCommitted(t *testing.T) {
	tn := startTiered(t, nil)
	cl := tn.client()
	createTopic(t, cl, "tiered", 1, tieredConfigs())
	tx := tn.client(kgo.TransactionalID("tiered-tx"), kgo.DefaultProduceTopic("tiered"))
	plain := tn.client(kgo.DefaultProduceTopic("tiered"))
	committed := 0
	for j := 0; j < 60; j++ {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 3; k++ {
			v := fmt.Sprintf("txn-%d-%d-%s", j, k, bytes.Repeat([]byte{'t'}, 30))
			if err := tx.ProduceSync(ctx(t), kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := plain.ProduceSync(ctx(t), kgo.StringRecord(fmt.Sprintf("plain-%d", j))).FirstErr(); err != nil {
			t.Fatal(err)
		}
		commit := j%3 != 1
		if err := tx.EndTransaction(ctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			committed += 3
		}
		committed++ // the plain record
	}
	readCommitted := func() []rec {
		c := tn.client(kgo.ConsumeTopics("tiered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
		var out []*kgo.Record
		cx := ctx(t)
		for len(out) < committed {
			fs := c.PollFetches(cx)
			if cx.Err() != nil {
				t.Fatalf("read %d of %d committed records", len(out), committed)
			}
			fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
		}
		for _, r := range out {
			if bytes.HasPrefix(r.Value, []byte("txn-")) {
				var j, k int
				fmt.Sscanf(string(r.Value), "txn-%d-%d-", &j, &k)
				if j%3 == 1 {
					t.Fatalf("aborted record %q read", r.Value)
				}
			}
		}
		return recsOf(out)
	}
	before := readCommitted()
	local := tn.tier(t, "tiered")
	after := readCommitted()
	if len(after) != len(before) {
		t.Fatalf("%d records after tiering, %d before", len(after), len(before))
	}
	for i := range before {
		if after[i] != before[i] {
			t.Fatalf("record %d: %+v after tiering, %+v before", i, after[i], before[i])
		}
	}
	// The remote read's answer names the aborted transactions.
	resp := fetchRaw(t, tn, cl, "tiered", 0, 1, "")
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || len(p.AbortedTransactions) == 0 {
		t.Fatalf("read_committed remote fetch: error %d, %d bytes, %d aborted (local start %d)", p.ErrorCode, len(p.RecordBatches), len(p.AbortedTransactions), local)
	}
}

// gatedStore blocks every Get until its gate opens: whatever the context
// (a store that hangs), or until the context ends with honorCtx.
type gatedStore struct {
	objstore.Store
	gate     chan struct{}
	honorCtx bool
}

func (g *gatedStore) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if g.honorCtx {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		<-g.gate
	}
	return g.Store.Get(ctx, key, off, n)
}

// TestTieredListOffsetsTimeout: a timestamp lookup in a remote log that
// does not answer within ListOffsets v10's TimeoutMs answers
// REQUEST_TIMED_OUT (Kafka's DelayedRemoteListOffsets expiring); once the
// store answers, the lookup does.
func TestTieredListOffsetsTimeout(t *testing.T) {
	gs := &gatedStore{gate: make(chan struct{}), honorCtx: true}
	tn := startTieredStore(t, nil, func(s objstore.Store) objstore.Store { gs.Store = s; return gs })
	cl := tn.client()
	createTopic(t, cl, "tiered", 1, tieredConfigs())
	for i := 0; i < 200; i++ {
		if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "tiered", Value: bytes.Repeat([]byte{'w'}, 50)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tn.tier(t, "tiered")
	lookup := func() kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(10)
		req.ReplicaID = -1
		req.TimeoutMillis = 200
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "tiered"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = 0 // the first record, in the remote log
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return request[*kmsg.ListOffsetsResponse](t, cl, req).Topics[0].Partitions[0]
	}
	if p := lookup(); p.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("lookup with the store hung: error %d offset %d", p.ErrorCode, p.Offset)
	}
	close(gs.gate)
	if p := lookup(); p.ErrorCode != 0 || p.Offset != 0 {
		t.Fatalf("lookup with the store back: error %d offset %d", p.ErrorCode, p.Offset)
	}
}

// TestTieredFetchWaitAndQueue: a remote read not done within
// remote.fetch.max.wait.ms leaves its partition empty without an error
// (Kafka's DelayedRemoteFetch expiring), a read that finds the reader
// queue full (remote.log.reader.max.pending.tasks) answers
// UNKNOWN_SERVER_ERROR at once, and once the store answers again the
// records come.
func TestTieredFetchWaitAndQueue(t *testing.T) {
	gs := &gatedStore{gate: make(chan struct{})}
	tn := startTieredStore(t, map[string]string{"remote.fetch.max.wait.ms": "300", "remote.log.reader.threads": "1",
		"remote.log.reader.max.pending.tasks": "1"}, func(s objstore.Store) objstore.Store { gs.Store = s; return gs })
	cl := tn.client()
	createTopic(t, cl, "tiered", 1, tieredConfigs())
	for i := 0; i < 200; i++ {
		if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "tiered", Value: bytes.Repeat([]byte{'w'}, 50)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tn.tier(t, "tiered")
	for i, want := range []int16{0, 0, kerr.UnknownServerError.Code} {
		start := time.Now()
		p := fetchRaw(t, tn, cl, "tiered", 0, 0, "").Topics[0].Partitions[0]
		took := time.Since(start)
		if p.ErrorCode != want || len(p.RecordBatches) != 0 {
			t.Fatalf("fetch %d with the store hung: error %d, %d bytes; want error %d, none", i, p.ErrorCode, len(p.RecordBatches), want)
		}
		if want == 0 && took < 300*time.Millisecond {
			t.Fatalf("fetch %d answered in %v, before remote.fetch.max.wait.ms", i, took)
		}
	}
	close(gs.gate)
	var p kmsg.FetchResponseTopicPartition
	deadline := time.Now().Add(10 * time.Second)
	for len(p.RecordBatches) == 0 && time.Now().Before(deadline) {
		p = fetchRaw(t, tn, cl, "tiered", 0, 0, "").Topics[0].Partitions[0]
	}
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("after the store came back: error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
	}
}
