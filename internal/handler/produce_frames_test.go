package handler_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/protocol"
)

// TestProduceFramesReusedIntact: the produce handler gives a request's
// frame back once its batches are in the log (protocol.Request.ReleaseFrame),
// so large produce requests are read into reused buffers, and every record
// produced with acks=1 and acks=all by two franz-go clients at once reads
// back as it was sent.
func TestProduceFramesReusedIntact(t *testing.T) {
	n := startNode(t, "", nil)
	admin := n.client()
	createTopic(t, admin, "frames", 3, nil)
	const perClient, size = 4000, 4000
	value := func(key string) []byte {
		r := rand.New(rand.NewPCG(uint64(len(key)), uint64(key[len(key)-1])*7919+uint64(key[0])))
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return append(b, key...)
	}
	reused := protocol.FramesReused()
	var wg sync.WaitGroup
	for _, c := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"all", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}},
		{"one", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
	} {
		cl := n.client(append(c.opts, kgo.DefaultProduceTopic("frames"), kgo.ProducerLinger(20*time.Millisecond))...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var errs sync.Map
			for i := range perClient {
				key := fmt.Sprintf("%s-%05d", c.name, i)
				cl.Produce(ctx(t), &kgo.Record{Key: []byte(key), Value: value(key)}, func(_ *kgo.Record, err error) {
					if err != nil {
						errs.Store(key, err)
					}
				})
			}
			if err := cl.Flush(ctx(t)); err != nil {
				t.Error(err)
			}
			errs.Range(func(k, v any) bool {
				t.Errorf("%v: %v", k, v)
				return false
			})
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[string]bool{}
	for _, r := range consume(t, n, "frames", 2*perClient) {
		if !bytes.Equal(r.Value, value(string(r.Key))) {
			t.Fatalf("record %s at %d/%d: value differs from the one produced", r.Key, r.Partition, r.Offset)
		}
		seen[string(r.Key)] = true
	}
	if len(seen) != 2*perClient {
		t.Fatalf("%d distinct records read back, want %d", len(seen), 2*perClient)
	}
	if got := protocol.FramesReused() - reused; got == 0 {
		t.Fatal("no produce request was read into a reused frame")
	} else {
		t.Logf("%d produce requests read into reused frames", got)
	}
}
