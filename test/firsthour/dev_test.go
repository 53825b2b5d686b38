package firsthour

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testproc"
)

// devBasePort finds a base port whose +0..+2, +100..+102 and +200..+202
// are free on 127.0.0.1 (candidates from testproc.FreePorts).
func devBasePort(t *testing.T) int {
	t.Helper()
	for range 200 {
		ps, err := testproc.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		base, ok := ps[0], true
		for _, off := range []int{0, 1, 2, 100, 101, 102, 200, 201, 202} {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+off))
			if err != nil {
				ok = false
				break
			}
			ln.Close()
		}
		if ok && base+202 < 65536 {
			return base
		}
	}
	t.Fatal("no free base port for sluice dev")
	return 0
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) tail(n int) string {
	lines := strings.Split(s.String(), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// devRun is a running `sluice dev --brokers 3` and its output.
type devRun struct {
	t     *testing.T
	cmd   *exec.Cmd
	out   *syncBuffer
	stdin io.Writer
	done  chan error
	base  int
	ctx   context.Context
}

// startDev starts `sluice dev --brokers 3` on free ports and waits for
// its ready line. The process is killed when the test ends; its output
// is logged if the test failed.
func startDev(t *testing.T) *devRun {
	t.Helper()
	bin := testproc.Build(t)
	d := &devRun{t: t, out: &syncBuffer{}, done: make(chan error, 1), base: devBasePort(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	d.ctx = ctx
	d.cmd = exec.CommandContext(ctx, bin, "dev", "--brokers", "3", "--base-port", strconv.Itoa(d.base), "--data-dir", t.TempDir())
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	stdin, err := d.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.stdin = stdin
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sluice dev output (tail):\n%s", d.out.tail(80))
		}
	})
	d.waitOut("ready line", regexp.MustCompile(`sluice dev: ready`), 60*time.Second)
	return d
}

// waitOut waits for re in dev's output and returns its submatches.
func (d *devRun) waitOut(what string, re *regexp.Regexp, timeout time.Duration) []string {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(d.out.String()); m != nil {
			return m
		}
		select {
		case err := <-d.done:
			d.t.Fatalf("sluice dev exited (%v) while waiting for %s", err, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.t.Fatalf("no %s in sluice dev's output after %v", what, timeout)
	return nil
}

// pid returns broker id's pid as dev printed it.
func (d *devRun) pid(id int) int {
	d.t.Helper()
	pid, _ := strconv.Atoi(d.waitOut(fmt.Sprintf("pid of broker %d", id), regexp.MustCompile(fmt.Sprintf(`broker %d: pid (\d+)`, id)), time.Second)[1])
	return pid
}

// seeds are the three brokers' Kafka addresses.
func (d *devRun) seeds() []string {
	var out []string
	for i := range 3 {
		out = append(out, "127.0.0.1:"+strconv.Itoa(d.base+i))
	}
	return out
}

// TestDevPlayground: `sluice dev --brokers 3` survives the SIGKILL of a
// broker (the others elect new leaders for its partitions and keep
// serving acks=all with min.insync.replicas=2), says which broker exited
// and how to restart it, restarts it on `restart N`, gives auto-created
// topics replication factor 3, and stops every broker on SIGINT.
func TestDevPlayground(t *testing.T) {
	d := startDev(t)
	ctx, out, stdin, done, cmd, waitOut := d.ctx, d.out, d.stdin, d.done, d.cmd, d.waitOut
	pid2 := d.pid(2)
	seeds := d.seeds()
	const topic = "auto"
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(v string) {
		t.Helper()
		pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
		defer pcancel()
		if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	produce("before")
	// meta asks until a broker describes the partition: around the kill
	// a broker may answer LEADER_NOT_AVAILABLE with no partitions (one
	// not caught up with the metadata log), which clients retry.
	meta := func() (*kmsg.MetadataResponseTopicPartition, []int32) {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		var resp *kmsg.MetadataResponse
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; {
			resp, err = req.RequestWith(ctx, cl)
			if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("metadata: %v %+v", err, resp)
			}
			time.Sleep(200 * time.Millisecond)
		}
		var brokers []int32
		for _, b := range resp.Brokers {
			brokers = append(brokers, b.NodeID)
		}
		return &resp.Topics[0].Partitions[0], brokers
	}
	p, _ := meta()
	if len(p.Replicas) != 3 {
		t.Fatalf("auto-created topic has replicas %v, want replication factor 3", p.Replicas)
	}
	// Make broker 2 the one that dies: if it does not lead the partition,
	// it is still a replica whose loss the others must absorb; kill the
	// leader when it is 2 so that a new leader is needed.
	victim, victimPid := 2, pid2
	if p.Leader != 2 {
		victim = int(p.Leader)
		victimPid = d.pid(victim)
	}
	t.Logf("SIGKILL broker %d (pid %d), leader of %s/0", victim, victimPid, topic)
	if err := syscall.Kill(victimPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitOut("exit report", regexp.MustCompile(fmt.Sprintf(`broker %d exited \(signal: killed\); the others keep running. Restart it by typing 'restart %d', or run:\n  \S+ serve --node-id %d`, victim, victim, victim)), 10*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, _ := meta()
		if p.Leader != int32(victim) && p.Leader >= 0 && p.ErrorCode == 0 {
			t.Logf("new leader of %s/0: %d", topic, p.Leader)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition still led by %d after 30 s: %+v", victim, p)
		}
		time.Sleep(200 * time.Millisecond)
	}
	produce("after the kill") // acks=all with 2 of 3 in sync

	if _, err := io.WriteString(stdin, fmt.Sprintf("restart %d\n", victim)); err != nil {
		t.Fatal(err)
	}
	waitOut("restart report", regexp.MustCompile(fmt.Sprintf(`broker %d restarted: pid \d+`, victim)), 10*time.Second)
	deadline = time.Now().Add(60 * time.Second)
	for {
		p, brokers := meta()
		if len(brokers) == 3 && len(p.ISR) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d not back in the ISR after restart: brokers %v, %+v", victim, brokers, p)
		}
		time.Sleep(200 * time.Millisecond)
	}
	produce("after the restart")

	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sluice dev after SIGINT: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("sluice dev still running 60 s after SIGINT")
	}
	t.Logf("SIGINT: every broker stopped after %v", time.Since(t0).Round(time.Millisecond))
	if got := strings.Count(out.String(), "controlled shutdown granted"); got < 2 {
		t.Errorf("%d controlled shutdowns granted, want at least 2 of the 3 brokers", got)
	}
	for _, pid := range regexp.MustCompile(`pid (\d+)`).FindAllStringSubmatch(out.String(), -1) {
		n, _ := strconv.Atoi(pid[1])
		if syscall.Kill(n, 0) == nil {
			t.Errorf("broker pid %d still running after dev exited", n)
		}
	}
}

// TestDevCtrlCWithDeadBroker: Ctrl-C of `sluice dev` right after a broker
// died (before the controller fenced it) stops the others without ever
// moving a partition's leadership onto the dead broker (the reported
// first-hour bug: during dev's shutdown every partition moved onto it; dev
// now waits for the dead broker to be fenced before stopping the others).
// A client watches the leaders through the shutdown.
func TestDevCtrlCWithDeadBroker(t *testing.T) {
	d := startDev(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "spread"
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 6, 3
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 15000
	if resp, err := req.RequestWith(d.ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create: %v %+v", err, resp)
	}
	leaders := func() (map[int32]int32, error) {
		mctx, cancel := context.WithTimeout(d.ctx, 2*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(mctx, cl)
		if err != nil || len(resp.Topics) != 1 {
			return nil, fmt.Errorf("metadata: %v", err)
		}
		out := map[int32]int32{}
		for _, p := range resp.Topics[0].Partitions {
			out[p.Partition] = p.Leader
		}
		return out, nil
	}
	// Every broker leads something before one dies.
	const dead = 3
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := leaders()
		led := false
		for _, b := range l {
			led = led || b == dead
		}
		if err == nil && len(l) == 6 && led {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d leads nothing: %v %v", dead, l, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := syscall.Kill(d.pid(dead), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	d.waitOut("exit report", regexp.MustCompile(fmt.Sprintf(`broker %d exited`, dead)), 10*time.Second)
	// Ctrl-C at once, before the controller has fenced the dead broker:
	// its old leaderships are still listed until then, but no partition
	// may move onto it.
	prev, err := leaders()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var observations, onDead int
	giveUp := time.After(90 * time.Second)
	for running := true; running; {
		select {
		case err := <-d.done:
			if err != nil {
				t.Fatalf("sluice dev after SIGINT: %v", err)
			}
			running = false
		case <-time.After(50 * time.Millisecond):
			l, err := leaders()
			if err != nil {
				continue // brokers going away
			}
			observations++
			// A partition the previous answer did not list (a broker
			// still catching up with the metadata answered it) has no
			// leader to compare with: only a listed leader that changes
			// to the dead broker is a move onto it.
			for p, b := range l {
				if was, known := prev[p]; known && b == dead && was != dead {
					onDead++
					t.Errorf("during dev's shutdown, partition %d moved from broker %d onto dead broker %d", p, was, dead)
				}
				prev[p] = b
			}
		case <-giveUp:
			t.Fatal("sluice dev still running 90 s after SIGINT")
		}
	}
	t.Logf("%d metadata answers during the shutdown, %d leaderships moved onto the dead broker", observations, onDead)
	if observations == 0 {
		t.Fatal("no metadata answer during the shutdown: the test saw nothing")
	}
}

// TestDevPortInUse: `sluice dev` exits non-zero, naming the port, when one
// of its brokers cannot bind.
func TestDevPortInUse(t *testing.T) {
	base := devBasePort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+1)) // broker 2's Kafka port
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testproc.Build(t), "dev", "--brokers", "3", "--base-port", strconv.Itoa(base), "--data-dir", t.TempDir())
	outb, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("sluice dev with a port in use: %v\n%s", err, outb)
	}
	if want := fmt.Sprintf("broker 2 cannot start: port %d (its Kafka listener) is in use", base+1); !strings.Contains(string(outb), want) {
		t.Fatalf("output lacks %q:\n%s", want, outb)
	}
}
