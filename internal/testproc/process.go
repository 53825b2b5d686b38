package testproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one OS process of the sluice binary that can be started,
// signalled (SIGKILL, SIGTERM), paused and resumed, and started again with
// the same arguments, without a testing.TB: Proc builds on it for tests,
// and the chaos harness (internal/chaos) for its nodes. Its methods are
// safe for concurrent use.
type Process struct {
	Bin     string
	Args    []string
	Env     []string // added to the environment
	LogPath string   // stdout and stderr, appended across starts
	// Label names the starter in the "=== <Label>: start #N" log line.
	Label string
	// OnExit, if set, runs when a started process has exited, with its
	// exit error and its log (still open, for a note), before Done is
	// closed.
	OnExit func(err error, log io.Writer)

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current process has exited
	waitErr error
	paused  bool
	starts  int
}

// Start launches the process; it must not be running.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return errors.New("already running")
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	label := p.Label
	if label == "" {
		label = "testproc"
	}
	fmt.Fprintf(logf, "=== %s: start #%d at %s: %s %s\n", label, p.starts, time.Now().Format(time.RFC3339Nano), p.Bin, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // terminal signals go to the starter, not the broker
		Pdeathsig: syscall.SIGKILL, // never outlive a crashed starter
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	p.cmd, p.done, p.waitErr, p.paused = cmd, done, nil, false
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		if p.OnExit != nil {
			p.OnExit(err, logf)
		}
		logf.Close()
		close(done)
	}()
	return nil
}

// Done is closed when the current process has exited (nil before the
// first Start).
func (p *Process) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running reports whether the process is started and has not exited.
func (p *Process) Running() bool {
	d := p.Done()
	return d != nil && !isClosed(d)
}

// Paused reports whether the running process was paused and not resumed.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.done != nil && !isClosed(p.done)
}

// Pid is the id of the last process started (0 if none).
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// ExitErr is the exit status of the last process (nil while running or
// after a clean exit).
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Signal sends sig to the running process.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil || isClosed(p.done) {
		return errors.New("not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits up to timeout for the exit (a no-op if the
// process is not running).
func (p *Process) Kill(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-p.Done():
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("pid %d did not exit within %v of SIGKILL", p.Pid(), timeout)
	}
}

// Term sends SIGTERM (a controlled shutdown), resuming a paused process
// so it can shut down, and waits up to timeout; then it SIGKILLs the
// process and returns an error. The exit status is in ExitErr.
func (p *Process) Term(timeout time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.Signal(syscall.SIGTERM)
	if p.Paused() {
		_ = p.Resume()
	}
	select {
	case <-p.Done():
		return nil
	case <-time.After(timeout):
		_ = p.Kill(10 * time.Second)
		return fmt.Errorf("did not exit within %v of SIGTERM; killed", timeout)
	}
}

// Pause freezes the process with SIGSTOP and waits (up to 5 s) until
// every thread of it is stopped, so nothing it does after Pause returns.
func (p *Process) Pause() error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for !ThreadsStopped(p.Pid()) {
		if time.Now().After(deadline) {
			return errors.New("threads not stopped 5s after SIGSTOP")
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	return p.Signal(syscall.SIGCONT)
}

// WaitReady waits until the Kafka listener at addr answers ApiVersions,
// failing early if the process exits.
func (p *Process) WaitReady(addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	for {
		done := p.Done()
		if done == nil || isClosed(done) {
			return fmt.Errorf("process exited before becoming ready: %v", p.ExitErr())
		}
		if lastErr = Probe(ctx, addr); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %v", timeout, lastErr)
		case <-done:
		case <-time.After(25 * time.Millisecond):
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
