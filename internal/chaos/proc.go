package chaos

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

// node is one `sluice serve` process the harness owns: a testproc.Process
// (start, SIGKILL, SIGTERM, SIGSTOP/SIGCONT, restart on the same data and
// ports) plus the harness's bookkeeping of which exits it caused.
type node struct {
	id        int
	kafkaPort int // real Kafka listener (--listen)
	ctrlPort  int // real controller listener (--controller-listen)
	httpPort  int
	p         testproc.Process // Bin, Args, Env and LogPath set by newCluster

	mu sync.Mutex
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
	n.wantDown = ""
	n.mu.Unlock()
	n.p.Label = "sluice-chaos"
	n.p.OnExit = n.exited
	return n.p.Start()
}

// exited records an exit the harness did not cause as a crash.
func (n *node) exited(err error, log io.Writer) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wantDown == "" || (n.wantDown == "term" && err != nil) {
		how := "exited on its own"
		if n.wantDown == "term" {
			how = "failed its controlled shutdown (SIGTERM)"
		}
		msg := fmt.Sprintf("node %d %s at %s: %v (see %s)", n.id, how, time.Now().Format("15:04:05.000"), err, n.p.LogPath)
		n.crashes = append(n.crashes, msg)
		fmt.Fprintf(log, "=== sluice-chaos: %s\n", msg)
	}
}

// note appends a harness line to the node's log, so fault times can be
// matched with the broker's own lines.
func (n *node) note(format string, args ...any) {
	f, err := os.OpenFile(n.p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "=== sluice-chaos %s: %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	f.Close()
}

func (n *node) doneCh() <-chan struct{} { return n.p.Done() }

func (n *node) running() bool { return n.p.Running() }

func (n *node) isPaused() bool { return n.p.Paused() }

// pid is the running process's id, 0 if it is not running.
func (n *node) pid() int {
	if !n.p.Running() {
		return 0
	}
	return n.p.Pid()
}

func (n *node) exitErr() error { return n.p.ExitErr() }

func (n *node) expectExit(how string) {
	n.mu.Lock()
	n.wantDown = how
	n.mu.Unlock()
}

// clearExpectedExit undoes expectExit(how) if the process is still running
// and nothing else changed it.
func (n *node) clearExpectedExit(how string) {
	n.mu.Lock()
	if n.wantDown == how && n.p.Running() {
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

// kill sends SIGKILL and waits (up to 10 s) for the exit.
func (n *node) kill() error {
	if !n.running() {
		return nil
	}
	n.expectExit("kill")
	if err := n.p.Kill(10 * time.Second); err != nil {
		return fmt.Errorf("node %d: %v", n.id, err)
	}
	return nil
}

// term sends SIGTERM (controlled shutdown), resuming a paused process, and
// waits up to d before SIGKILLing it; an error exit is an error.
func (n *node) term(d time.Duration) error {
	if !n.running() {
		return nil
	}
	n.expectExit("term")
	if err := n.p.Term(d); err != nil {
		return fmt.Errorf("node %d: %v", n.id, err)
	}
	if err := n.exitErr(); err != nil {
		return fmt.Errorf("node %d exited with %v after SIGTERM", n.id, err)
	}
	return nil
}

// pause freezes the process with SIGSTOP and waits until all its threads
// are stopped.
func (n *node) pause() error {
	if err := n.p.Pause(); err != nil {
		return fmt.Errorf("node %d: %v", n.id, err)
	}
	return nil
}

// resume continues a paused process.
func (n *node) resume() error { return n.p.Resume() }

// waitReady waits until the real Kafka port answers ApiVersions.
func (n *node) waitReady(timeout time.Duration) error {
	if err := n.p.WaitReady(n.kafkaAddr(), timeout); err != nil {
		return fmt.Errorf("node %d: %v", n.id, err)
	}
	return nil
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
