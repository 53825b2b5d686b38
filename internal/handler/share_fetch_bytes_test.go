package handler_test

import (
	"math/rand"
	"testing"
)

// TestShareFetchMaxBytesSplitUniformly: a ShareFetch's MaxBytes is split
// evenly over its partitions, as Kafka's PartitionMaxBytesStrategy
// (UNIFORM) does for a share fetch, each partition's first batch whole:
// with records waiting on two partitions, both get some, and neither more
// than its half and one batch.
func TestShareFetchMaxBytesSplitUniformly(t *testing.T) {
	n := startNode(t, "", sharePartProps)
	createTopic(t, n.client(), "qb", 2, nil)
	cl := manualClient(n)
	val := func() string { // incompressible
		b := make([]byte, 1000)
		rand.Read(b)
		return string(b)
	}
	for range 20 {
		produceTo(t, cl, "qb", 0, val()) // one batch per record
		produceTo(t, cl, "qb", 1, val())
	}
	setGroupConfig(t, n, "sgb", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, n, "sgb", "qb", 0, 1)
	maxBytes := int32(8000) // about 7 batches of 1,070 bytes
	m.maxBytes = &maxBytes
	resp := m.fetch(0)
	acquiredOf(t, resp) // checks the errors and the records sent
	per := map[int32]int{}
	size := map[int32]int{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			for _, a := range p.AcquiredRecords {
				per[p.Partition] += int(a.LastOffset - a.FirstOffset + 1)
			}
			size[p.Partition] += len(p.Records)
		}
	}
	t.Logf("per %v size %v", per, size)
	if per[0] == 0 || per[1] == 0 {
		t.Fatalf("acquired %v records per partition with MaxBytes %d: want both partitions served", per, maxBytes)
	}
	batch := size[0] / per[0]
	for p, b := range size {
		if b > int(maxBytes)/2+batch {
			t.Fatalf("partition %d: %d bytes, more than its half of MaxBytes %d and one batch", p, b, maxBytes)
		}
	}
}
