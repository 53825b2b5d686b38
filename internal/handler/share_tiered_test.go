package handler_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// shareDrain fetches as m, accepting what it acquires, until want records
// were acquired (or 100 fetches), and returns their values by offset; an
// offset acquired twice fails the test.
func shareDrain(t *testing.T, m *shareMember, want int) map[int64]string {
	t.Helper()
	got := map[int64]string{}
	var acks []acked
	for tries := 0; len(got) < want && tries < 100; tries++ {
		resp := m.fetch(0, acks...)
		acks = nil
		acq := acquiredOf(t, resp)
		vals := map[int64]string{}
		for _, p := range resp.Topics[0].Partitions {
			for _, r := range decodeRecords(p.Records) {
				vals[r.Offset] = string(r.Value)
			}
			for _, a := range p.AcquiredRecords {
				acks = append(acks, acked{first: a.FirstOffset, last: a.LastOffset, types: []int8{1}})
			}
		}
		for k := range acq {
			off := k & (1<<32 - 1)
			if _, dup := got[off]; dup {
				t.Fatalf("offset %d acquired twice", off)
			}
			got[off] = vals[off]
		}
	}
	return got
}

// TestShareFetchTiered: a share group with share.auto.offset.reset=earliest
// on a tiered topic whose oldest segments left the local disk starts at
// offset 0, below the leader's local log start, and is handed every
// record, those of the remote log read from it (as a consumer fetch
// would), then the local ones, each once, with its value.
func TestShareFetchTiered(t *testing.T) {
	props := map[string]string{}
	for k, v := range sharePartProps {
		props[k] = v
	}
	tn := startTiered(t, props)
	cl := tn.client()
	const topic, n = "tiered-share", 200
	createTopic(t, cl, topic, 1, tieredConfigs())
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%03d-%s", i, bytes.Repeat([]byte{'x'}, 40)))}
		if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	local := tn.tier(t, topic)
	setGroupConfig(t, tn.node, "sg-tiered", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, tn.node, "sg-tiered", topic)
	got := shareDrain(t, m, n)
	if len(got) != n {
		t.Fatalf("%d records acquired of %d (local log start %d)", len(got), n, local)
	}
	for i := int64(0); i < n; i++ {
		if want := fmt.Sprintf("v%03d-", i); len(got[i]) < 5 || got[i][:5] != want {
			t.Fatalf("offset %d: value %q", i, got[i])
		}
	}
}

// TestShareFetchTieredReadCommitted: under share.isolation.level=
// read_committed, a share group reading a tiered topic from offset 0 gets
// the committed records of the remote log and none of the aborted ones:
// the remote transaction indexes name them, as they do for a consumer.
func TestShareFetchTieredReadCommitted(t *testing.T) {
	props := map[string]string{}
	for k, v := range sharePartProps {
		props[k] = v
	}
	tn := startTiered(t, props)
	cl := tn.client()
	const topic = "tiered-share-rc"
	createTopic(t, cl, topic, 1, tieredConfigs())
	tx := tn.client(kgo.TransactionalID("tiered-share-tx"), kgo.DefaultProduceTopic(topic))
	committed := 0
	for j := 0; j < 45; j++ {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 3; k++ {
			v := fmt.Sprintf("txn-%d-%d-%s", j, k, bytes.Repeat([]byte{'t'}, 30))
			if err := tx.ProduceSync(ctx(t), kgo.StringRecord(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		commit := j%3 != 1
		if err := tx.EndTransaction(ctx(t), kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			committed += 3
		}
	}
	local := tn.tier(t, topic)
	setGroupConfig(t, tn.node, "sg-tiered-rc", "share.auto.offset.reset", "earliest")
	setGroupConfig(t, tn.node, "sg-tiered-rc", "share.isolation.level", "read_committed")
	m := newShareMember(t, tn.node, "sg-tiered-rc", topic)
	got := shareDrain(t, m, committed)
	remote := 0
	for off, v := range got {
		var j, k int
		if _, err := fmt.Sscanf(v, "txn-%d-%d-", &j, &k); err != nil || !strings.HasPrefix(v, "txn-") {
			t.Fatalf("offset %d: value %q", off, v)
		}
		if j%3 == 1 {
			t.Fatalf("offset %d: aborted record %q delivered", off, v)
		}
		if off < local {
			remote++
		}
	}
	if len(got) != committed || remote == 0 {
		t.Fatalf("%d records acquired (%d from the remote log, local start %d), %d committed", len(got), remote, local, committed)
	}
}
