package remote

import "encoding/binary"

// MetadataTopic is the internal topic that holds the remote log metadata
// (TopicBasedRemoteLogMetadataManagerConfig.REMOTE_LOG_METADATA_TOPIC_NAME).
const MetadataTopic = "__remote_log_metadata"

// MetadataPartition returns the __remote_log_metadata partition, of n,
// that holds p's records, as Kafka's RemoteLogMetadataTopicPartitioner
// picks it: murmur2 of the four big-endian bytes of
// Objects.hash(topicId.leastSignificantBits, topicId.mostSignificantBits,
// partition), made positive, modulo n. A Kafka cluster and sluice put a
// partition's records in the same metadata partition.
func MetadataPartition(p Partition, n int32) int32 {
	msb := int64(binary.BigEndian.Uint64(p.TopicID[:8]))
	lsb := int64(binary.BigEndian.Uint64(p.TopicID[8:]))
	h := int32(1)
	h = 31*h + int32(lsb^int64(uint64(lsb)>>32))
	h = 31*h + int32(msb^int64(uint64(msb)>>32))
	h = 31*h + p.Partition
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(h))
	return (murmur2(b[:]) & 0x7fffffff) % n
}

// murmur2 is Kafka's Utils.murmur2 (the default partitioner's hash).
func murmur2(data []byte) int32 {
	const (
		seed = uint32(0x9747b28c)
		m    = uint32(0x5bd1e995)
		r    = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	for i := 0; i+4 <= n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n&^3:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}
