package tieredstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

// remoteState reads all of __remote_log_metadata into a remote.Cache and
// returns the tiered partition's segments (every state) and how many
// copies were abandoned: segments that went from COPY_SEGMENT_STARTED to
// DELETE_SEGMENT_STARTED (a copy a crash or a lost leadership
// interrupted, cleaned up by a leader).
func (e *e2e) remoteState(ctx context.Context) (rp remote.Partition, segs []remote.Segment, abandoned int) {
	e.t.Helper()
	adm := e.c.Admin()
	td, err := adm.ListTopics(ctx, e2eTopic)
	if err != nil {
		e.t.Fatal(err)
	}
	rp = remote.Partition{TopicID: td[e2eTopic].ID, Topic: e2eTopic, Partition: 0}
	ends, err := adm.ListEndOffsets(ctx, remote.MetadataTopic)
	if err != nil {
		e.t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	cl := e.c.Client(kgo.ConsumeTopics(remote.MetadataTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var cache remote.Cache
	started := map[[16]byte]bool{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e.t.Fatalf("reading %s: %v (left: %v)", remote.MetadataTopic, ctx.Err(), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			rec, err := remote.Decode(r.Value)
			if err != nil {
				e.t.Fatalf("%s-%d@%d: %v", remote.MetadataTopic, r.Partition, r.Offset, err)
			}
			if rec.Update != nil && rec.Update.Partition == rp {
				if rec.Update.State == remote.DeleteStarted && started[rec.Update.ID] {
					abandoned++
				}
				started[rec.Update.ID] = false
			}
			if rec.Segment != nil && rec.Segment.Partition == rp {
				started[rec.Segment.ID] = true
			}
			cache.Apply(rec) // a refused transition changes nothing, as on the brokers
		})
	}
	return rp, cache.All(rp), abandoned
}

// remoteProblems checks the remote log of the tiered partition against the
// object store: no segment is left COPY_SEGMENT_STARTED or
// DELETE_SEGMENT_STARTED, and the objects under the partition's prefix
// are exactly those of its COPY_SEGMENT_FINISHED segments (nothing
// orphaned by the killed leader, nothing missing). It returns what is
// wrong, and a summary.
func (e *e2e) remoteProblems(s3 *testproc.S3Server) (problems []string, abandoned int, summary string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := objstore.NewS3(s3.Options())
	if err != nil {
		e.t.Fatal(err)
	}
	rp, segs, abandoned := e.remoteState(ctx)
	want := map[string]bool{}
	finished := 0
	for _, s := range segs {
		if s.State != remote.CopyFinished {
			problems = append(problems, fmt.Sprintf("remote segment %d-%d left %v", s.StartOffset, s.EndOffset, s.State))
			continue
		}
		finished++
		for k := remote.FileLog; k <= remote.FileLeaderEpochs; k++ {
			if k == remote.FileTxnIndex && s.TxnIndexEmpty {
				continue
			}
			want[remote.ObjectKey("", &s, k)] = true
		}
	}
	keys, err := st.List(ctx, remote.PartitionPrefix("", rp))
	if err != nil {
		e.t.Fatal(err)
	}
	got := map[string]bool{}
	for _, k := range keys {
		got[k] = true
		if !want[k] {
			problems = append(problems, fmt.Sprintf("object %s belongs to no finished remote segment", k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !got[k] {
			problems = append(problems, fmt.Sprintf("object %s of a finished remote segment is missing", k))
		}
	}
	return problems, abandoned, fmt.Sprintf("%d finished segments, %d objects, %d abandoned copies cleaned up", finished, len(keys), abandoned)
}

// checkRemote waits (up to a minute: a new leader cleans up at its next
// task) until remoteProblems finds nothing wrong, logs the summary and
// returns how many abandoned copies were cleaned up.
func (e *e2e) checkRemote(s3 *testproc.S3Server) (abandoned int) {
	e.t.Helper()
	var summary string
	testcluster.WaitForEvery(e.t, time.Second, time.Minute, "a clean remote log", func() (bool, string) {
		var problems []string
		problems, abandoned, summary = e.remoteProblems(s3)
		return len(problems) == 0, strings.Join(problems, "; ")
	})
	e.t.Logf("remote log: %s", summary)
	return abandoned
}

// killMidCopy SIGKILLs the partition's leader as soon as the newest
// __remote_log_metadata record of the partition is a COPY_SEGMENT_STARTED
// it wrote (a copy under way), or after timeout whatever the state, and
// returns whether the copy was cut short (some of its objects not
// written).
func (e *e2e) killMidCopy(s3 *testproc.S3Server, leader int32, timeout time.Duration) bool {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	td, err := e.c.Admin().ListTopics(ctx, e2eTopic)
	if err != nil {
		e.t.Fatal(err)
	}
	rp := remote.Partition{TopicID: td[e2eTopic].ID, Topic: e2eTopic, Partition: 0}
	st, err := objstore.NewS3(s3.Options())
	if err != nil {
		e.t.Fatal(err)
	}
	mp := remote.MetadataPartition(rp, 50) // remote.log.metadata.topic.num.partitions
	cl := e.c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		remote.MetadataTopic: {mp: kgo.NewOffset().AtStart()}}), kgo.FetchMaxWait(50*time.Millisecond))
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e.c.Node(leader).Kill()
			return false
		}
		var last *remote.Record
		fs.EachRecord(func(r *kgo.Record) {
			rec, err := remote.Decode(r.Value)
			if err != nil {
				e.t.Fatalf("%s-%d@%d: %v", remote.MetadataTopic, r.Partition, r.Offset, err)
			}
			if (rec.Segment != nil && rec.Segment.Partition == rp) || (rec.Update != nil && rec.Update.Partition == rp) {
				last = &rec
			}
		})
		if last != nil && last.Segment != nil && last.Segment.BrokerID == leader && cl.BufferedFetchRecords() == 0 {
			e.c.Node(leader).Kill()
			// The copy was cut short if not all of its objects were
			// written (COPY_SEGMENT_FINISHED comes after the last one);
			// with all of them there, its FINISHED may have been on its
			// way.
			keys, err := st.List(ctx, remote.ObjectKey("", last.Segment, remote.FileLog)[:len(remote.PartitionPrefix("", rp))+20])
			if err != nil {
				e.t.Fatal(err)
			}
			id := base64.RawURLEncoding.EncodeToString(last.Segment.ID[:])
			n := 0
			for _, k := range keys {
				if strings.Contains(k, id) {
					n++
				}
			}
			return n < 5
		}
	}
}

// offTS is a record's offset and timestamp (ms).
type offTS struct{ offset, ts int64 }

// checkTimestamps looks up timestamps with ListOffsets across the tiers
// (RemoteLogManager.findOffsetByTimestamp): for records read (in offset
// order) at a few places in the remote part and in the local tail, each
// the first of its millisecond with its predecessor at the offset just
// before it (no aborted record or marker between), the lookup of its
// timestamp answers its offset.
func (e *e2e) checkTimestamps(what string, read []offTS, localStart int64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := e.c.Admin()
	checked, remoteChecked := 0, 0
	for _, frac := range []float64{0.05, 0.2, 0.4, 0.6, 0.8, 0.97} {
		for i := max(int(frac*float64(len(read))), 1); i < len(read); i++ {
			if read[i].ts <= read[i-1].ts || read[i].offset != read[i-1].offset+1 {
				continue
			}
			lo, err := adm.ListOffsetsAfterMilli(ctx, read[i].ts, e2eTopic)
			if err != nil {
				e.t.Fatal(err)
			}
			got, ok := lo.Lookup(e2eTopic, 0)
			if !ok || got.Err != nil {
				e.t.Fatalf("%s: ListOffsets at %d: %v %v", what, read[i].ts, ok, got.Err)
			}
			if got.Offset != read[i].offset {
				e.t.Errorf("%s: ListOffsets at %d answered %d, want %d (the local log starts at %d)", what, read[i].ts, got.Offset, read[i].offset, localStart)
			}
			checked++
			if read[i].offset < localStart {
				remoteChecked++
			}
			break
		}
	}
	e.t.Logf("%s: %d timestamp lookups (%d in the remote log) answered the first offset of the millisecond", what, checked, remoteChecked)
	if remoteChecked == 0 {
		e.t.Errorf("%s: no timestamp lookup in the remote log", what)
	}
}

// deleteRecords deletes the records below the one at read[len/4] (in
// the remote log) with DeleteRecords, then checks that the log start is
// there (ListOffsets -2), that a consumer from offset 0 is reset to it
// and gets that record first, byte for byte, and that the remote
// segments wholly below it expire: waits until none is left and the
// bucket holds exactly the finished segments' objects.
func (e *e2e) deleteRecords(s3 *testproc.S3Server, read []offTS, localStart int64) {
	e.t.Helper()
	var want []rec
	for _, r := range e.written {
		if r.kind != 'a' {
			want = append(want, r)
		}
	}
	j := len(read) / 4
	at := read[j].offset
	if at >= localStart {
		e.t.Fatalf("offset %d is not in the remote log (local start %d)", at, localStart)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := e.c.Admin()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: e2eTopic, Partition: 0, At: at})
	res, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		e.t.Fatal(err)
	}
	if r, _ := res.Lookup(e2eTopic, 0); r.Err != nil || r.LowWatermark != at {
		e.t.Fatalf("DeleteRecords to %d: low watermark %d, %v", at, r.LowWatermark, r.Err)
	}
	if got, err := listOffset(ctx, e.c.Client(), e2eTopic, 0, -2); err != nil || got != at {
		e.t.Fatalf("ListOffsets earliest after DeleteRecords to %d: %d, %v", at, got, err)
	}
	cl := e.c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{e2eTopic: {0: kgo.NewOffset().At(0)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e.t.Fatalf("reading after DeleteRecords: %v", ctx.Err())
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if recs[0].Offset != at || string(recs[0].Value) != string(value(want[j], e2eRecLen)) {
			e.t.Fatalf("after DeleteRecords to %d: first record at %d: %.20q, want %.20q", at, recs[0].Offset, recs[0].Value, value(want[j], e2eRecLen))
		}
		break
	}
	testcluster.WaitForEvery(e.t, time.Second, time.Minute, "the remote segments below the log start expired", func() (bool, string) {
		_, segs, _ := e.remoteState(ctx)
		for _, s := range segs {
			if s.EndOffset < at {
				return false, fmt.Sprintf("segment %d-%d %v", s.StartOffset, s.EndOffset, s.State)
			}
		}
		return true, ""
	})
	e.checkRemote(s3)
	e.t.Logf("DeleteRecords to %d (remote log): log start there, the record there read first, the remote segments below it expired", at)
}
