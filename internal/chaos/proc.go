package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

// node is one `sluice serve` process the harness owns: it can be started,
// SIGKILLed, SIGTERMed (controlled shutdown), SIGSTOPped and SIGCONTed, and
// restarted on the same data directory and ports. It is the testproc
// approach without testing.TB.
type node struct {
	id        int
	bin       string
	args      []string
	logPath   string
	kafkaPort int // real Kafka listener (--listen)
	ctrlPort  int // real controller listener (--controller-listen)
	httpPort  int
	env       []string // added to the environment

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	paused  bool
	starts  int
	// wantDown is how the harness stopped the process ("" none, "kill",
	// "term", "disk": a failing disk it injected); an exit without it,
	// or an error exit after SIGTERM, is a crash.
	wantDown string
	crashes  []string
}

func (n *node) kafkaAddr() string { return "127.0.0.1:" + strconv.Itoa(n.kafkaPort) }

// start launches the process (it must not be running).
func (n *node) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !isClosed(n.done) {
		return errors.New("already running")
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(logf, "=== sluice-chaos: start #%d at %s: %s %s\n", n.starts, time.Now().Format(time.RFC3339Nano), n.bin, strings.Join(n.args, " "))
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(n.env) > 0 {
		cmd.Env = append(os.Environ(), n.env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // terminal signals go to the harness only
		Pdeathsig: syscall.SIGKILL, // never outlive a crashed harness
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	n.cmd, n.done, n.waitErr, n.paused, n.wantDown = cmd, done, nil, false, ""
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.waitErr = err
		if n.wantDown == "" || (n.wantDown == "term" && err != nil) {
			how := "exited on its own"
			if n.wantDown == "term" {
				how = "failed its controlled shutdown (SIGTERM)"
			}
			msg := fmt.Sprintf("node %d %s at %s: %v (see %s)", n.id, how, time.Now().Format("15:04:05.000"), err, n.logPath)
			n.crashes = append(n.crashes, msg)
			fmt.Fprintf(logf, "=== sluice-chaos: %s\n", msg)
		}
		n.mu.Unlock()
		logf.Close()
		close(done)
	}()
	return nil
}

// note appends a harness line to the node's log, so fault times can be
// matched with the broker's own lines.
func (n *node) note(format string, args ...any) {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "=== sluice-chaos %s: %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	f.Close()
}

func (n *node) doneCh() chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.done
}

func (n *node) running() bool {
	d := n.doneCh()
	return d != nil && !isClosed(d)
}

func (n *node) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused && n.done != nil && !isClosed(n.done)
}

func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || isClosed(n.done) {
		return 0
	}
	return n.cmd.Process.Pid
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (n *node) expectExit(how string) {
	n.mu.Lock()
	n.wantDown = how
	n.mu.Unlock()
}

// clearExpectedExit undoes expectExit(how) if the process is still running
// and nothing else changed it.
func (n *node) clearExpectedExit(how string) {
	n.mu.Lock()
	if n.wantDown == how && n.done != nil && !isClosed(n.done) {
		n.wantDown = ""
	}
	n.mu.Unlock()
}

// disk sets the node's disk fault through the broker's fault-injection
// endpoint (POST /debug/disk?<query>, enabled by SLUICE_FAULT_INJECTION=1;
// see docs/storage.md).
func (n *node) disk(query string) error {
	hc := &http.Client{Timeout: 3 * time.Second}
	resp, err := hc.Post(fmt.Sprintf("http://127.0.0.1:%d/debug/disk?%s", n.httpPort, query), "text/plain", nil)
	if err != nil {
		return fmt.Errorf("node %d: disk %s: %w", n.id, query, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %d: disk %s: %s %s", n.id, query, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

func (n *node) crashList() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.crashes...)
}

func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || isClosed(n.done) {
		return errors.New("not running")
	}
	return n.cmd.Process.Signal(sig)
}

// kill sends SIGKILL and waits (up to 10 s) for the exit.
func (n *node) kill() error {
	if !n.running() {
		return nil
	}
	n.expectExit("kill")
	_ = n.signal(syscall.SIGKILL)
	select {
	case <-n.doneCh():
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("node %d did not exit within 10s of SIGKILL", n.id)
	}
}

// term sends SIGTERM (controlled shutdown), resuming a paused process, and
// waits up to d before SIGKILLing it.
func (n *node) term(d time.Duration) error {
	if !n.running() {
		return nil
	}
	n.expectExit("term")
	_ = n.signal(syscall.SIGTERM)
	if n.isPaused() {
		_ = n.signal(syscall.SIGCONT)
		n.mu.Lock()
		n.paused = false
		n.mu.Unlock()
	}
	select {
	case <-n.doneCh():
		if err := n.exitErr(); err != nil {
			return fmt.Errorf("node %d exited with %v after SIGTERM", n.id, err)
		}
		return nil
	case <-time.After(d):
		_ = n.kill()
		return fmt.Errorf("node %d did not exit within %v of SIGTERM; killed", n.id, d)
	}
}

// pause freezes the process with SIGSTOP and waits until all its threads
// are stopped.
func (n *node) pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for !testproc.ThreadsStopped(n.pid()) {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d: threads not stopped 5s after SIGSTOP", n.id)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// resume continues a paused process.
func (n *node) resume() error {
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
	return n.signal(syscall.SIGCONT)
}

// waitReady waits until the real Kafka port answers ApiVersions.
func (n *node) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		done := n.doneCh()
		if done == nil || isClosed(done) {
			return fmt.Errorf("node %d exited before becoming ready: %v", n.id, n.exitErr())
		}
		if last = testproc.Probe(ctx, n.kafkaAddr()); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d not ready after %v: %v", n.id, timeout, last)
		case <-done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.waitErr
}

// BuildBinary compiles ./cmd/sluice of the enclosing module into dir.
func BuildBinary(dir string) (string, error) {
	root, err := testproc.ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "sluice")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/sluice")
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/sluice: %v\n%s", err, b)
	}
	return out, nil
}
