package tieredstore

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

// rec is one record the test wrote: its kind ('p' plain, 'c' in a
// committed transaction, 'a' in an aborted one) and sequence number,
// from which its value is made again (value).
type rec struct {
	kind byte
	seq  int64
}

// value is the record's value: "<kind><seq, 12 digits>|" then
// pseudo-random filler seeded by the sequence number (so that the bytes
// on disk are the bytes produced, whatever compression), size bytes in
// all, so a record read back is compared byte for byte.
func value(r rec, size int) []byte {
	b := make([]byte, size)
	n := copy(b, fmt.Sprintf("%c%012d|", r.kind, r.seq))
	x := uint64(r.seq)*0x9E3779B97F4A7C15 + 1
	for i := n; i < size; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// envInt is the integer environment variable name, or def.
func envInt(t *testing.T, name string, def int64) int64 {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// dirBytes is the size of the files under dir (0 if it does not exist).
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// diskSampler samples the size of one partition directory on each node
// every 200 ms and keeps the largest seen.
type diskSampler struct {
	mu   sync.Mutex
	max  map[int]int64
	stop chan struct{}
	done chan struct{}
}

// sampleDisk starts a diskSampler over dirs (node id -> partition dir).
func sampleDisk(dirs map[int]string) *diskSampler {
	s := &diskSampler{max: map[int]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			for id, d := range dirs {
				n := dirBytes(d)
				s.mu.Lock()
				s.max[id] = max(s.max[id], n)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the largest size seen per node.
func (s *diskSampler) Stop() map[int]int64 {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int64{}
	for k, v := range s.max {
		out[k] = v
	}
	return out
}

// listOffset asks the partition's leader (through cl) for the offset of
// a ListOffsets timestamp (-2 earliest, -1 latest, -4 earliest local,
// -5 latest tiered).
func listOffset(ctx context.Context, cl *kgo.Client, topic string, part int32, ts int64) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = part
	rp.Timestamp = ts
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets: unexpected answer %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, err
	}
	return p.Offset, nil
}

// metric is the sum of the samples of a Prometheus metric on a node's
// /metrics page (-1 if it cannot be read).
func metric(p *testproc.Proc, name string) float64 {
	resp, err := http.Get("http://" + p.HTTPAddr() + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(buf.String(), "\n") {
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// logCount counts the lines of p's log that contain s.
func logCount(p *testproc.Proc, s string) int {
	b, _ := os.ReadFile(p.LogPath())
	return strings.Count(string(b), s)
}

// wipe removes everything in dir, as a replaced disk.
func wipe(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}
