package replica

import "testing"

// BenchmarkLeaderAppend: one idempotent acks=1 batch of 16 records per op
// through Append, Ready and Advance.
func BenchmarkLeaderAppend(b *testing.B) {
	r := New(Config{ID: 1, MinISR: 2}, LogState{})
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}})
	r.Ready()
	r.Advance()
	data := make([]byte, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Append(ProduceRequest{ID: uint64(i), Acks: AcksLeader, Batch: Batch{NumRecords: 16, ProducerID: 7, BaseSeq: int32(i*16) & 0x3fffffff, Data: data}})
		rd := r.Ready()
		if len(rd.Completed) != 1 || rd.Completed[0].Error != ErrNone {
			b.Fatalf("%+v", rd.Completed)
		}
		r.Advance()
	}
}

// BenchmarkReplicationRound: per op, an acks=all batch of 16 records is
// appended and flushed on the leader, both followers fetch past it, the HW
// advances and the produce completes.
func BenchmarkReplicationRound(b *testing.B) {
	r := New(Config{ID: 1, MinISR: 2, LagTimeMaxMs: 30000}, LogState{})
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}})
	r.Ready()
	r.Advance()
	data := make([]byte, 1024)
	req := FetchRequest{BrokerEpoch: -1, CurrentLeaderEpoch: 1, LastFetchedEpoch: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Tick(int64(i))
		r.Append(ProduceRequest{ID: uint64(i), Acks: AcksAll, Batch: Batch{NumRecords: 16, ProducerID: NoProducer, Data: data}})
		r.Flushed(r.LEO(), r.LogGen())
		req.FetchOffset = r.LEO()
		req.ReplicaID = 2
		r.HandleFetch(req)
		req.ReplicaID = 3
		r.HandleFetch(req)
		rd := r.Ready()
		if len(rd.Completed) != 1 || !rd.HWChanged {
			b.Fatalf("%+v", rd)
		}
		r.Advance()
	}
}

// BenchmarkFollowerApply: per op, a fetch response with one 16-record batch
// is applied on a follower, written (Ready/Advance) and flushed.
func BenchmarkFollowerApply(b *testing.B) {
	r := New(Config{ID: 2, MinISR: 2}, LogState{})
	r.ApplyMetadata(PartitionState{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}})
	r.Ready()
	r.Advance()
	data := make([]byte, 1024)
	batches := make([]Batch, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, ok := r.FetchRequest()
		if !ok {
			b.Fatal("no fetch")
		}
		batches[0] = Batch{BaseOffset: req.FetchOffset, NumRecords: 16, Epoch: 1, ProducerID: 7, BaseSeq: int32(i*16) & 0x3fffffff, Data: data}
		r.HandleFetchResponse(FetchResponse{Request: req, FetchResult: FetchResult{HW: req.FetchOffset}, Batches: batches})
		r.Ready()
		r.Advance()
		r.Flushed(r.LEO(), r.LogGen())
	}
}
