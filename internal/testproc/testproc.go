// Package testproc runs real sluice broker processes for tests.
//
// Build compiles ./cmd/sluice once per test binary; Start launches
// `sluice serve` on free loopback ports with its own data directory and
// log file, and returns when the broker answers an ApiVersions request.
// The log's tail is printed when the test fails, and the process is
// SIGKILLed when the test ends.
//
//	func TestMain(m *testing.M) { testproc.Main(m) }
//
//	func TestX(t *testing.T) {
//		p := testproc.Start(t, testproc.Options{})
//		cl := p.Client(t) // franz-go client seeded with p.Addr()
//		...
//		p.Kill()    // SIGKILL, wait
//		p.Restart() // same data dir and ports
//	}
//
// For multi-node clusters reserve ports first with FreePorts, build the
// per-node flags (--voters ...) into Options.ExtraArgs, and start each node
// with explicit ListenPort/HTTPPort/ControllerPort.
//
// Environment:
//
//	SLUICE_BIN                use this binary instead of building one
//	SLUICE_TEST_BUILDFLAGS    extra `go build` flags, e.g. "-race"
//	SLUICE_TEST_LOG_LINES     lines of log tail printed on failure (default 80)
package testproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultStartTimeout bounds how long Start and Restart wait for the
// broker to answer ApiVersions.
const DefaultStartTimeout = 20 * time.Second

// DefaultStopTimeout bounds how long Stop waits after SIGTERM before it
// SIGKILLs the process and reports an error.
const DefaultStopTimeout = 30 * time.Second

var (
	buildOnce sync.Once
	buildPath string
	buildDir  string
	buildErr  error
)

// BuildBinary compiles ./cmd/sluice (once per process) into a temporary
// directory and returns the binary's path. If SLUICE_BIN is set, that path
// is returned instead. Call Cleanup (or use Main) to remove the directory.
func BuildBinary() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("SLUICE_BIN"); p != "" {
			buildPath, buildErr = filepath.Abs(p)
			if buildErr == nil {
				_, buildErr = os.Stat(buildPath)
			}
			return
		}
		root, err := ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sluice-testbin-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		out := filepath.Join(dir, "sluice")
		args := []string{"build", "-o", out}
		args = append(args, strings.Fields(os.Getenv("SLUICE_TEST_BUILDFLAGS"))...)
		args = append(args, "./cmd/sluice")
		cmd := exec.Command(goTool(), args...)
		cmd.Dir = root
		var buf bytes.Buffer
		cmd.Stdout = &buf
		cmd.Stderr = &buf
		start := time.Now()
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go %s (in %s): %v\n%s", strings.Join(args, " "), root, err, buf.String())
			return
		}
		buildPath = out
		if flag.Parsed() && testing.Verbose() {
			fmt.Fprintf(os.Stderr, "testproc: built %s in %v\n", out, time.Since(start).Round(time.Millisecond))
		}
	})
	return buildPath, buildErr
}

// Build returns the path of the sluice binary, building it on first use;
// it fails the test if the build fails.
func Build(t testing.TB) string {
	t.Helper()
	p, err := BuildBinary()
	if err != nil {
		t.Fatalf("testproc: building sluice: %v", err)
	}
	return p
}

// Cleanup removes the directory BuildBinary built into.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Main runs the tests and removes the built binary afterwards:
//
//	func TestMain(m *testing.M) { testproc.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if gr := os.Getenv("GOROOT"); gr != "" {
		return filepath.Join(gr, "bin", "go")
	}
	return "go"
}

// ModuleRoot walks up from the working directory to the directory holding
// go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testproc: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// FreePorts picks n distinct TCP ports that are free on 127.0.0.1. They
// come from below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), so no outgoing connection or
// ":0" listener can take one between this call and the process binding it;
// only another caller of FreePorts could (Start retries with new ports when
// it picked them itself).
func FreePorts(n int) ([]int, error) {
	lo, hi := portRange()
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("testproc: no free port in [%d, %d)", lo, hi)
		}
		port := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // taken (or still held by one of ours)
		}
		lns = append(lns, ln)
		ports = append(ports, port)
	}
	return ports, nil
}

// portRange is where FreePorts picks: [10000, start of the ephemeral
// range), at most 20000 ports wide.
func portRange() (lo, hi int) {
	hi = 32768 // Linux's default ephemeral start
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				hi = v
			}
		}
	}
	return max(10000, hi-20000), hi
}

// Options configure one sluice process. Zero values pick defaults.
type Options struct {
	// Name labels log lines and the log file (default "node<NodeID>").
	Name string
	// NodeID is passed as --node-id (default 1).
	NodeID int
	// ListenPort is the Kafka port; 0 picks a free one.
	ListenPort int
	// HTTPPort is the --http port; 0 picks a free one, -1 disables --http.
	HTTPPort int
	// ControllerPort, if > 0, is passed as --controller-listen.
	ControllerPort int
	// DataDir is --data-dir; empty means a fresh t.TempDir().
	DataDir string
	// ExtraArgs are appended after the standard flags (e.g. --voters,
	// --config).
	ExtraArgs []string
	// Env is added to the process environment.
	Env []string
	// StartTimeout bounds the readiness wait (default DefaultStartTimeout).
	StartTimeout time.Duration
	// Binary is the sluice binary to run (default: Build, this
	// checkout's).
	Binary string
	// NoWait returns as soon as the process is started, without waiting
	// for the Kafka port (useful for nodes of a cluster that cannot serve
	// until a quorum is up; call WaitReady later).
	NoWait bool
}

// Proc is a running (or stopped) sluice process.
type Proc struct {
	t           testing.TB
	bin         string
	opts        Options
	name        string
	logPath     string
	args        []string
	pickedPorts bool
	ps          *Process
}

// Start builds (if needed) and starts `sluice serve` and waits until it
// answers ApiVersions. The process is SIGKILLed when the test ends, and the
// tail of its log is printed if the test failed.
func Start(t testing.TB, opts Options) *Proc {
	t.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = Build(t)
	}
	if opts.NodeID == 0 {
		opts.NodeID = 1
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	name := opts.Name
	if name == "" {
		name = "node" + strconv.Itoa(opts.NodeID)
	}
	p := &Proc{
		t:       t,
		bin:     bin,
		opts:    opts,
		name:    name,
		logPath: filepath.Join(t.TempDir(), name+".log"),
	}
	p.ps = &Process{Bin: bin, Env: opts.Env, LogPath: p.logPath, Label: "testproc"}
	t.Cleanup(p.cleanup)

	pick := opts.ListenPort == 0 || opts.HTTPPort == 0
	p.pickedPorts = pick
	for attempt := 1; ; attempt++ {
		if pick {
			ports, err := FreePorts(2)
			if err != nil {
				t.Fatalf("testproc: %v", err)
			}
			if opts.ListenPort == 0 {
				p.opts.ListenPort = ports[0]
			}
			if opts.HTTPPort == 0 {
				p.opts.HTTPPort = ports[1]
			}
		}
		p.args = p.buildArgs()
		p.ps.Args = p.args
		err := p.ps.Start()
		if err == nil && !opts.NoWait {
			err = p.WaitReady(opts.StartTimeout)
		}
		if err == nil {
			return p
		}
		// A port taken between FreePorts and the broker's bind: retry
		// with new ports, if we chose them.
		if pick && attempt < 3 && p.exited() && p.logContains("address already in use") {
			t.Logf("testproc: %s: port collision, retrying with new ports", p.name)
			continue
		}
		t.Fatalf("testproc: starting %s: %v\n%s", p.name, err, p.LogTail(tailLines()))
	}
}

func (p *Proc) buildArgs() []string {
	o := p.opts
	args := []string{"serve",
		"--node-id", strconv.Itoa(o.NodeID),
		"--listen", "127.0.0.1:" + strconv.Itoa(o.ListenPort),
		"--data-dir", o.DataDir,
	}
	if o.HTTPPort > 0 {
		args = append(args, "--http", "127.0.0.1:"+strconv.Itoa(o.HTTPPort))
	}
	if o.ControllerPort > 0 {
		args = append(args, "--controller-listen", "127.0.0.1:"+strconv.Itoa(o.ControllerPort))
	}
	return append(args, o.ExtraArgs...)
}

// WaitReady waits until the Kafka port accepts connections and an
// ApiVersions round trip through franz-go succeeds.
func (p *Proc) WaitReady(timeout time.Duration) error {
	return p.ps.WaitReady(p.Addr(), timeout)
}

// Probe checks that a Kafka listener at addr answers ApiVersions (through
// franz-go, without retries).
func Probe(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "sluice-testproc"
	req.ClientSoftwareVersion = "1.0.0"
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return fmt.Errorf("ApiVersions: %w", err)
	}
	if resp.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions: error code %d", resp.ErrorCode)
	}
	if len(resp.ApiKeys) == 0 {
		return errors.New("ApiVersions: no api keys in response")
	}
	return nil
}

// Name labels the process in logs ("node<NodeID>" by default).
func (p *Proc) Name() string { return p.name }

// UseBinary makes the next Restart run bin (a rolling upgrade).
func (p *Proc) UseBinary(bin string) {
	p.bin, p.ps.Bin = bin, bin
}

// Addr is the Kafka listener, "127.0.0.1:PORT".
func (p *Proc) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.opts.ListenPort) }

// HTTPAddr is the --http listener, or "" if disabled.
func (p *Proc) HTTPAddr() string {
	if p.opts.HTTPPort <= 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(p.opts.HTTPPort)
}

// ListenPort, HTTPPort and ControllerPort are the ports in use.
func (p *Proc) ListenPort() int     { return p.opts.ListenPort }
func (p *Proc) HTTPPort() int       { return p.opts.HTTPPort }
func (p *Proc) ControllerPort() int { return p.opts.ControllerPort }

// NodeID is the --node-id.
func (p *Proc) NodeID() int { return p.opts.NodeID }

// DataDir is the --data-dir.
func (p *Proc) DataDir() string { return p.opts.DataDir }

// LogPath is the file the process's stdout and stderr go to (appended
// across restarts).
func (p *Proc) LogPath() string { return p.logPath }

// Args are the command-line arguments (after the binary).
func (p *Proc) Args() []string { return append([]string(nil), p.args...) }

// Pid is the current process id (0 if never started).
func (p *Proc) Pid() int { return p.ps.Pid() }

// Running reports whether the process has not exited.
func (p *Proc) Running() bool { return p.ps.Running() }

// ExitErr is the exit status of the last process (nil while running or
// after a clean exit).
func (p *Proc) ExitErr() error { return p.ps.ExitErr() }

func (p *Proc) exited() bool { return !p.ps.Running() }

// Kill sends SIGKILL and waits for the process to exit. It is a no-op if
// the process already exited.
func (p *Proc) Kill() {
	p.t.Helper()
	if err := p.ps.Kill(10 * time.Second); err != nil {
		p.t.Fatalf("testproc: %s: %v", p.name, err)
	}
}

// Stop sends SIGTERM (a controlled shutdown) and waits up to
// DefaultStopTimeout; if the process has not exited by then it is killed
// and the test fails. A paused process is resumed so it can shut down.
func (p *Proc) Stop() {
	p.t.Helper()
	if err := p.StopTimeout(DefaultStopTimeout); err != nil {
		p.t.Fatalf("testproc: %s: %v", p.name, err)
	}
}

// StopTimeout is Stop with an explicit timeout, returning an error
// instead of failing the test.
func (p *Proc) StopTimeout(d time.Duration) error { return p.ps.Term(d) }

// Pause freezes the process with SIGSTOP and waits (up to 5 s) until
// every thread of it is stopped, so nothing it does after Pause returns.
func (p *Proc) Pause() {
	p.t.Helper()
	if err := p.ps.Pause(); err != nil {
		p.t.Fatalf("testproc: pause %s: %v", p.name, err)
	}
}

// ThreadsStopped reports whether every thread of pid is in state T
// (stopped) according to /proc, as it is some time after SIGSTOP. Without
// /proc (or for pid 0) it reports true.
func ThreadsStopped(pid int) bool {
	if pid == 0 {
		return true
	}
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // thread exited
		}
		// "tid (comm) S ..." — comm may hold spaces or parens: use the
		// last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() {
	p.t.Helper()
	if err := p.ps.Resume(); err != nil {
		p.t.Fatalf("testproc: resume %s: %v", p.name, err)
	}
}

// Restart starts the process again with the same arguments (data dir and
// ports) and waits until it is ready. A process that is still running is
// first stopped with SIGTERM; call Kill first to simulate a crash.
func (p *Proc) Restart() {
	p.t.Helper()
	if !p.exited() {
		p.Stop()
	}
	if err := p.ps.Start(); err != nil {
		p.t.Fatalf("testproc: restarting %s: %v", p.name, err)
	}
	if p.opts.NoWait {
		return
	}
	if err := p.WaitReady(p.opts.StartTimeout); err != nil {
		p.t.Fatalf("testproc: restarting %s: %v\n%s", p.name, err, p.LogTail(tailLines()))
	}
}

// Client returns a franz-go client seeded with this broker; it is closed
// when the test ends.
func (p *Proc) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.Addr())}, opts...)...)
	if err != nil {
		t.Fatalf("testproc: kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// LogTail returns the last n lines of the process log.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	skipped := 0
	if len(lines) > n {
		skipped = len(lines) - n
		lines = lines[skipped:]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s log (%s), last %d lines (%d skipped) ---\n", p.name, p.logPath, len(lines), skipped)
	for _, l := range lines {
		sb.WriteString(l)
		sb.WriteByte('\n')
	}
	sb.WriteString("--- end of log ---")
	return sb.String()
}

func (p *Proc) logContains(s string) bool {
	b, _ := os.ReadFile(p.logPath)
	return bytes.Contains(b, []byte(s))
}

func tailLines() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_TEST_LOG_LINES")); err == nil && n > 0 {
		return n
	}
	return 80
}

func (p *Proc) cleanup() {
	if p.t.Failed() {
		p.t.Log(p.LogTail(tailLines()))
	}
	if err := p.ps.Kill(10 * time.Second); err != nil {
		p.t.Errorf("testproc: %s: %v", p.name, err)
	}
}

// RequireTool returns the path of the first of names found on PATH (an
// external client such as kcat, node or chromium). When none is there the
// test is skipped, except under CI (CI set), where it fails:
// scripts/install-test-deps.sh installs them.
func RequireTool(t testing.TB, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if ci := os.Getenv("CI"); ci != "" {
		t.Fatalf("%s not found on PATH and CI=%q: run scripts/install-test-deps.sh", strings.Join(names, " or "), ci)
	}
	t.Skipf("%s not found on PATH (run scripts/install-test-deps.sh); skipped outside CI", strings.Join(names, " or "))
	return ""
}
