package main

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawFetchVersion is the Fetch version rawConsume speaks (topic ids,
// flexible).
const rawFetchVersion = 13

// rawConsume reads want records of topic from the start with plain Fetch
// requests on one TCP connection to the partitions' leader, reading each
// response into one reused buffer and counting batches from their headers
// without decoding records: it measures what the broker serves, as the
// loopback measurement (loopbackMBPerSec) measures what the machine moves,
// not what a client library can parse (franz-go's per-record decoding and
// per-response allocation, on the same cores, are otherwise the ceiling).
// It returns the records and bytes read and the seconds taken.
func rawConsume(ctx context.Context, seeds []string, topic string, want int) (int, int64, float64, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, dialOpts...)...)
	if err != nil {
		return 0, 0, 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, 0, 0, err
	}
	t, ok := td[topic]
	if !ok || t.Err != nil {
		return 0, 0, 0, fmt.Errorf("topic %s: %v", topic, t.Err)
	}
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	leader := t.Partitions[0].Leader
	for _, p := range t.Partitions {
		if p.Leader != leader {
			return 0, 0, 0, fmt.Errorf("--raw-fetch reads from one leader; partition %d is led by %d, not %d", p.Partition, p.Leader, leader)
		}
	}
	addr := ""
	for _, b := range meta.Brokers {
		if b.NodeID == leader {
			addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	var conn net.Conn
	if clientTLS != nil {
		d := tls.Dialer{Config: clientTLS}
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}

	offsets := make([]int64, len(t.Partitions))
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sluice-bench"))
	var out []byte
	buf := make([]byte, 0, 72<<20)
	var records int
	var bytes int64
	start := time.Now()
	for corr := int32(1); records < want; corr++ {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(rawFetchVersion)
		req.ReplicaID, req.ReplicaState.ID = -1, -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 500, 1, 64<<20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, t.ID
		for p, off := range offsets {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), off, 16<<20
			rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		out = f.AppendRequest(out[:0], req, corr)
		if _, err := conn.Write(out); err != nil {
			return records, bytes, time.Since(start).Seconds(), err
		}
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return records, bytes, time.Since(start).Seconds(), err
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 5 || n > cap(buf) {
			return records, bytes, time.Since(start).Seconds(), fmt.Errorf("fetch response of %d bytes", n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(conn, buf); err != nil {
			return records, bytes, time.Since(start).Seconds(), err
		}
		// Response header v1: correlation id, then tagged fields (none).
		if got := int32(binary.BigEndian.Uint32(buf)); got != corr || buf[4] != 0 {
			return records, bytes, time.Since(start).Seconds(), fmt.Errorf("response header: correlation %d (want %d), %d tags", got, corr, buf[4])
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(rawFetchVersion)
		if err := resp.UnsafeReadFrom(buf[5:]); err != nil {
			return records, bytes, time.Since(start).Seconds(), err
		}
		if resp.ErrorCode != 0 {
			return records, bytes, time.Since(start).Seconds(), fmt.Errorf("fetch: error %d", resp.ErrorCode)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					return records, bytes, time.Since(start).Seconds(), fmt.Errorf("partition %d: error %d", rp.Partition, rp.ErrorCode)
				}
				b := rp.RecordBatches
				bytes += int64(len(b))
				// v2 batch header: baseOffset int64, length int32, ...,
				// lastOffsetDelta int32 at 23, records count int32 at 57.
				for len(b) >= 61 {
					size := 12 + int(binary.BigEndian.Uint32(b[8:]))
					if size > len(b) {
						break
					}
					base := int64(binary.BigEndian.Uint64(b))
					offsets[rp.Partition] = base + int64(binary.BigEndian.Uint32(b[23:])) + 1
					records += int(binary.BigEndian.Uint32(b[57:]))
					b = b[size:]
				}
			}
		}
	}
	return records, bytes, time.Since(start).Seconds(), nil
}
