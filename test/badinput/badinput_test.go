// Package badinput sends malformed bytes to a real sluice process: each
// malformed frame or request must get a Kafka error code or a closed
// connection, never a crash or a hang, and the broker must keep serving
// other clients throughout.
package badinput

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

func frame(req kmsg.Request, version int16, corr int32) []byte {
	req.SetVersion(version)
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "bad"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// exchange writes raw bytes and returns the response body (after the
// correlation id), or nil if the connection was closed without an answer.
func exchange(t *testing.T, addr string, raw []byte) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(raw)
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("broker neither answered nor closed the connection")
		}
		return nil
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	return body[4:]
}

func mustStillServe(t *testing.T, p *testproc.Proc) {
	t.Helper()
	cl := p.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal("broker stopped serving:", err)
	}
}

func TestMalformedFrames(t *testing.T) {
	p := testproc.Start(t, testproc.Options{})
	meta := frame(kmsg.NewPtrMetadataRequest(), 4, 1)
	truncated := append([]byte(nil), meta[:len(meta)-2]...)
	binary.BigEndian.PutUint32(truncated, uint32(len(truncated)-4+10)) // claims more than sent
	cases := map[string][]byte{
		"negative length":     {0xff, 0xff, 0xff, 0xf0},
		"huge length":         {0x7f, 0xff, 0xff, 0xff},
		"zero length":         {0, 0, 0, 0},
		"length below header": {0, 0, 0, 4, 0, 3, 0, 1},
		"unknown api key":     withKeyVersion(meta, 31000, 0),
		"impossible version":  withKeyVersion(meta, 3, 999),
		"negative version":    withKeyVersion(meta, 3, -5),
		"garbage body":        append(append(append([]byte(nil), meta[:17]...), 0x7f), bytes.Repeat([]byte{0xff}, 20)...),
		"truncated frame":     truncated,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "garbage body" {
				binary.BigEndian.PutUint32(raw, uint32(len(raw)-4))
			}
			if name == "truncated frame" {
				// The broker waits for the rest of the frame (up to
				// connections.max.idle.ms); meanwhile it must serve others.
				c, err := net.Dial("tcp", p.Addr())
				if err != nil {
					t.Fatal(err)
				}
				c.Write(raw)
				mustStillServe(t, p)
				c.Close()
				mustStillServe(t, p)
				return
			}
			if body := exchange(t, p.Addr(), raw); body != nil {
				t.Fatalf("%s: answered with %d bytes instead of closing", name, len(body))
			}
			mustStillServe(t, p)
		})
	}
}

func withKeyVersion(b []byte, key, version int16) []byte {
	c := append([]byte(nil), b...)
	binary.BigEndian.PutUint16(c[4:], uint16(key))
	binary.BigEndian.PutUint16(c[6:], uint16(version))
	return c
}

func TestMalformedRequestsGetErrorCodes(t *testing.T) {
	p := testproc.Start(t, testproc.Options{})
	cl := p.Client(t, kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// ApiVersions with an unknown version: a v0 answer with UNSUPPORTED_VERSION.
	av := withKeyVersion(frame(kmsg.NewPtrApiVersionsRequest(), 3, 7), 18, 77)
	body := exchange(t, p.Addr(), av)
	resp := kmsg.NewPtrApiVersionsResponse()
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ApiVersions fallback: %v %+v", err, resp)
	}
	// Oversized topic names.
	long := strings.Repeat("t", 300)
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = long, 1, 1
	ct.Topics = append(ct.Topics, rt)
	ctResp, err := ct.RequestWith(ctx, cl)
	if err != nil || ctResp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("long topic name: %v %+v", err, ctResp)
	}
	huge := strings.Repeat("x", 40000)
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: &huge}}
	mdResp, err := md.RequestWith(ctx, cl)
	if err != nil || mdResp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("huge topic name in metadata: %v", err)
	}
	// Corrupt batches against a real topic.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "victim", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	good := batchtest.Build(batchtest.Options{Codec: batch.Zstd}, batchtest.Values("a", "b"))
	badCRC := append([]byte(nil), good...)
	badCRC[len(badCRC)-1] ^= 1
	garbage := append([]byte(nil), good...)
	for i := batch.HeaderSize; i < len(garbage); i++ {
		garbage[i] = byte(i)
	}
	crc := batch.ComputeCRC(garbage)
	binary.BigEndian.PutUint32(garbage[17:], crc)
	for name, recs := range map[string][]byte{"corrupt crc": badCRC, "garbage in compressed batch": garbage} {
		pr := kmsg.NewPtrProduceRequest()
		pr.Acks = -1
		pr.TimeoutMillis = 5000
		prt := kmsg.NewProduceRequestTopic()
		prt.Topic = "victim"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = recs
		prt.Partitions = append(prt.Partitions, pp)
		pr.Topics = append(pr.Topics, prt)
		raw := exchange(t, p.Addr(), frame(pr, 7, 9))
		presp := kmsg.NewPtrProduceResponse()
		presp.SetVersion(7)
		if err := presp.ReadFrom(raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c := presp.Topics[0].Partitions[0].ErrorCode; c != kerr.CorruptMessage.Code {
			t.Fatalf("%s: error %v, want CORRUPT_MESSAGE", name, kerr.ErrorForCode(c))
		}
	}
	// Nothing bad was stored: the topic still holds just the one record.
	ends, err := kadmEnd(ctx, cl, "victim")
	if err != nil || ends != 1 {
		t.Fatalf("log end after bad batches: %d %v", ends, err)
	}
	mustStillServe(t, p)
}

func kadmEnd(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	return resp.Topics[0].Partitions[0].Offset, nil
}
