package broker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/storage"
	"github.com/sluice-io/sluice/internal/vfs"
)

// openFaulty opens a single-node broker on an OS directory wrapped with
// inj; OnFatal reports into the returned channel instead of exiting.
func openFaulty(t *testing.T, inj vfs.Injector) (*broker.Broker, chan error) {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:1"
	fatal := make(chan error, 10)
	b, err := broker.Open(broker.Options{Config: cfg, FS: vfs.WithFaults(vfs.Default, inj),
		OnFatal: func(err error) { fatal <- err }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.CreateTopic("t", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	return b, fatal
}

func produce(t *testing.T, p *broker.Partition, acks int16, value string) <-chan replica.ProduceResult {
	t.Helper()
	data := buildBatch(value)
	h, err := batch.ParseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	return p.Produce(data, h, acks, time.Now().Add(time.Minute))
}

func result(t *testing.T, ch <-chan replica.ProduceResult) replica.ProduceResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("produce request neither acknowledged nor failed after 30s")
		return replica.ProduceResult{}
	}
}

func waitFatal(t *testing.T, fatal chan error) error {
	t.Helper()
	select {
	case err := <-fatal:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("OnFatal not called 30s after the disk failure")
		return nil
	}
}

// After a failed fsync the broker halts (OnFatal), as Kafka does when its
// last log dir fails, and nothing appended after the last good fsync is
// acknowledged: acks=all requests fail, acks=1 requests are not durable,
// the HW does not move, and new produce requests fail with
// KAFKA_STORAGE_ERROR.
func TestSyncFailureHaltsAndAcknowledgesNothing(t *testing.T) {
	rule := &vfs.Rule{Ops: []vfs.Op{vfs.OpSync}, PathContains: "/t-0/", Err: errors.New("EIO")}
	rule.Disable()
	b, fatal := openFaulty(t, rule)
	p, err := b.Leader("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := result(t, produce(t, p, -1, "before")); r.Error != 0 {
		t.Fatalf("acks=all before the fault: %v", kerr.ErrorForCode(r.Error))
	}
	hw := p.Status(nil).HW // under the partition lock: consistent with the ack
	if hw != 1 {
		t.Fatalf("HW %d after one acknowledged record", hw)
	}

	rule.Enable()
	all := []<-chan replica.ProduceResult{produce(t, p, -1, "all-1"), produce(t, p, -1, "all-2")}
	one := produce(t, p, 1, "one")
	err = waitFatal(t, fatal)
	if !errors.Is(err, storage.ErrFailed) || !strings.Contains(err.Error(), "t-0") || !strings.Contains(err.Error(), "fsync") {
		t.Fatalf("OnFatal(%v): want a storage.ErrFailed naming the fsync of t-0", err)
	}
	for i, ch := range all {
		if r := result(t, ch); r.Error == 0 {
			t.Errorf("acks=all request %d acknowledged at %d after a failed fsync", i, r.BaseOffset)
		}
	}
	if r := result(t, one); r.Error != kerr.KafkaStorageError.Code {
		t.Errorf("acks=1 request: %+v after a failed fsync, want KAFKA_STORAGE_ERROR", r)
	}
	if r := result(t, produce(t, p, -1, "after")); r.Error != kerr.KafkaStorageError.Code {
		t.Errorf("produce after the failure: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(r.Error))
	}
	if got := p.Status(nil).HW; got != hw {
		t.Errorf("HW moved from %d to %d after a failed fsync", hw, got)
	}
	select {
	case err := <-fatal:
		t.Errorf("OnFatal called twice (again with %v)", err)
	default:
	}
	if rule.Fired() == 0 {
		t.Error("the fault never fired")
	}
}

// A failed write (the append itself) halts too, through the same path;
// so does a failed write of the HW checkpoint (at Close here).
func TestWriteFailureHalts(t *testing.T) {
	d := vfs.NewDiskFaults("/")
	b, fatal := openFaulty(t, d)
	p, err := b.Leader("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	d.Set(vfs.DiskFail, 0)
	r := result(t, produce(t, p, 1, "x"))
	err = waitFatal(t, fatal)
	if !errors.Is(err, storage.ErrFailed) || !strings.Contains(err.Error(), "append of t-0") {
		t.Fatalf("OnFatal(%v): want a storage.ErrFailed naming the append to t-0", err)
	}
	if r.Error == 0 {
		t.Fatalf("acks=1 append acknowledged at %d although its write failed", r.BaseOffset)
	}

	// The HW checkpoint is a file of the data directory too.
	d2 := vfs.NewDiskFaults("/")
	b2, fatal2 := openFaulty(t, d2)
	d2.Set(vfs.DiskFail, 0)
	b2.Close()
	err = waitFatal(t, fatal2)
	if !strings.Contains(err.Error(), "replication-offset-checkpoint") {
		t.Fatalf("OnFatal(%v): want the HW checkpoint named", err)
	}
}

// A segment roll that cannot create the new segment's files halts.
func TestRollFailureHalts(t *testing.T) {
	rule := &vfs.Rule{Ops: []vfs.Op{vfs.OpCreate}, PathContains: "/r-0/"}
	rule.Disable()
	b, fatal := openFaulty(t, rule)
	if err := b.CreateTopic("r", 1, 1, map[string]string{"segment.bytes": "200"}, false); err != nil {
		t.Fatal(err)
	}
	p, err := b.Leader("r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := result(t, produce(t, p, -1, strings.Repeat("a", 60))); r.Error != 0 {
		t.Fatalf("first batch: %v", kerr.ErrorForCode(r.Error))
	}
	rule.Enable()
	// The next batch does not fit: the log rolls, and creating the new
	// segment fails.
	r := result(t, produce(t, p, -1, strings.Repeat("b", 60)))
	err = waitFatal(t, fatal)
	if !errors.Is(err, storage.ErrFailed) || !strings.Contains(err.Error(), "append of r-0") {
		t.Fatalf("OnFatal(%v): want a storage.ErrFailed naming the append to r-0", err)
	}
	if r.Error == 0 {
		t.Fatalf("batch acknowledged at %d although its segment could not be created", r.BaseOffset)
	}
}
