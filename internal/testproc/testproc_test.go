package testproc

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { Main(m) }

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "sluice")); err != nil {
		t.Fatalf("module root %s has no cmd/sluice: %v", root, err)
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("bad or duplicate port %d in %v", p, ports)
		}
		seen[p] = true
	}
}

// produceOne produces one record with acks=all and returns its offset.
func produceOne(t *testing.T, p *Proc, topic, value string) int64 {
	t.Helper()
	cl := p.Client(t, kgo.AllowAutoTopicCreation(), kgo.RecordRetries(20))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).First()
	if err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	cl.Close()
	return r.Offset
}

func TestLifecycle(t *testing.T) {
	p := Start(t, Options{})
	if p.Pid() == 0 || !p.Running() {
		t.Fatalf("not running after Start: pid %d", p.Pid())
	}
	port, httpPort, pid := p.ListenPort(), p.HTTPPort(), p.Pid()
	if port == 0 || httpPort == 0 || port == httpPort {
		t.Fatalf("ports: kafka %d http %d", port, httpPort)
	}
	if off := produceOne(t, p, "testproc-lifecycle", "a"); off != 0 {
		t.Fatalf("first record offset %d, want 0", off)
	}

	// Pause: the port still accepts TCP (kernel backlog) but ApiVersions
	// cannot complete.
	p.Pause()
	if err := p.WaitReady(500 * time.Millisecond); err == nil {
		t.Fatal("paused broker answered ApiVersions")
	}
	p.Resume()
	if err := p.WaitReady(10 * time.Second); err != nil {
		t.Fatalf("after Resume: %v", err)
	}

	// Crash and restart on the same ports and data dir: the acked record
	// is still there, so the next offset is 1.
	p.Kill()
	if p.Running() {
		t.Fatal("running after Kill")
	}
	p.Restart()
	if p.ListenPort() != port || p.HTTPPort() != httpPort {
		t.Fatalf("ports changed across restart: %d/%d -> %d/%d", port, httpPort, p.ListenPort(), p.HTTPPort())
	}
	if p.Pid() == pid {
		t.Fatalf("pid unchanged across restart: %d", pid)
	}
	if off := produceOne(t, p, "testproc-lifecycle", "b"); off != 1 {
		t.Fatalf("record after restart has offset %d, want 1 (data dir lost?)", off)
	}

	// Controlled shutdown exits cleanly.
	p.Stop()
	if p.Running() {
		t.Fatal("running after Stop")
	}
	if err := p.ExitErr(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestStartFailsFast(t *testing.T) {
	// A process that exits at once must be reported without waiting for
	// the full start timeout. Run Start in a sub-test we expect to fail.
	ft := &fakeT{TB: t}
	start := time.Now()
	func() {
		defer func() { recover() }()
		Start(ft, Options{ExtraArgs: []string{"--no-such-flag"}, StartTimeout: 15 * time.Second})
	}()
	if !ft.fataled {
		t.Fatal("Start with a bad flag did not fail")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Start took %v to notice the process exited", d)
	}
}

// fakeT turns Fatalf into a recorded panic so a failing Start can be
// observed without failing the real test.
type fakeT struct {
	testing.TB
	fataled bool
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.fataled = true
	f.TB.Logf("(expected) "+format, args...)
	panic("fatal")
}
func (f *fakeT) Failed() bool { return false }
func (f *fakeT) Helper()      {}
