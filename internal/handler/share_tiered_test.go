package handler_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
	got := map[int64]string{}
	var acks []acked
	for tries := 0; len(got) < n && tries < 100; tries++ {
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
	if len(got) != n {
		t.Fatalf("%d records acquired of %d (local log start %d)", len(got), n, local)
	}
	for i := int64(0); i < n; i++ {
		if want := fmt.Sprintf("v%03d-", i); len(got[i]) < 5 || got[i][:5] != want {
			t.Fatalf("offset %d: value %q", i, got[i])
		}
	}
}
