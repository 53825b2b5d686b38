package broker

// SyncFSRounds is how many syncfs rounds the flusher ran and how many
// partition rounds they covered.
func (b *Broker) SyncFSRounds() (rounds, partitions int64) {
	return b.flusher.batches.Load(), b.flusher.batched.Load()
}

// DefaultSyncFSMinPartitions is the default threshold of syncfs rounds.
const DefaultSyncFSMinPartitions = defaultSyncFSMinPartitions
