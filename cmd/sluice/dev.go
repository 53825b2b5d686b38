package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/config"
)

// devUsage heads `sluice dev --help`.
const devUsage = `usage: sluice dev [--brokers N] [--base-port 9092] [--data-dir DIR] [--config FILE] [--s3]

Runs a local cluster: one 'sluice serve' process per broker. Broker i serves
Kafka on base-port+i-1, its controller (brokers 1-3 are the quorum's voters)
on base-port+100+i-1 and its status page on base-port+200+i-1. Topics
default to replication factor min(3,N) and min.insync.replicas min(2,N).

With --s3, dev also serves an S3-compatible object store on base-port+300
(objects kept in DIR/s3) and turns tiered storage on with it: a topic
created with remote.storage.enable=true keeps its older segments there
(docs/tiered-storage.md).

A broker that dies does not stop the others: dev prints the command that
restarts it. Commands on standard input:

  restart N   start broker N again (after it exited)
  stop N      SIGTERM broker N (a controlled shutdown)
  status      list the brokers and their pids

Ctrl-C (or SIGTERM) stops every broker, one at a time, each with a
controlled shutdown.

flags:
`

// devBroker is one broker process of a dev cluster.
type devBroker struct {
	id    int
	args  []string
	kafka string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exits
}

func (b *devBroker) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return false
	}
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

func (b *devBroker) pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// devCluster is the state of `sluice dev`.
type devCluster struct {
	self    string
	brokers []*devBroker
	out     sync.Mutex // serializes lines written to stdout and stderr
	exited  chan *devBroker
}

// dev runs a local cluster for development; see devUsage. It returns an
// error (exit status 1) if a broker cannot start.
func dev(args []string) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	n := fs.Int("brokers", 3, "number of brokers (1-9)")
	basePort := fs.Int("base-port", 9092, "Kafka port of broker 1; broker i listens on base-port+i-1")
	dataDir := fs.String("data-dir", "./sluice-dev", "parent folder of every broker's data")
	cfgFile := fs.String("config", "", "server.properties passed to every broker (over dev's defaults)")
	withS3 := fs.Bool("s3", false, "serve an S3-compatible object store on base-port+300 and turn tiered storage on with it")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), devUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *n < 1 || *n > 9 {
		return fmt.Errorf("invalid value %d for --brokers: expected 1 to 9", *n)
	}
	if *basePort < 1 || *basePort+200+*n-1 > 65535 || *withS3 && *basePort+300 > 65535 {
		return fmt.Errorf("invalid value %d for --base-port: expected a port such that base-port+%d <= 65535", *basePort, max(200+*n-1, 300))
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	kafka := func(i int) int { return *basePort + i - 1 }
	ctrl := func(i int) int { return *basePort + 100 + i - 1 }
	http := func(i int) int { return *basePort + 200 + i - 1 }
	// Every port must be free before anything starts: a broker that
	// cannot bind would otherwise fail later, after the others started.
	for i := 1; i <= *n; i++ {
		ports := []struct {
			port int
			what string
		}{{kafka(i), "Kafka"}, {http(i), "HTTP status"}}
		if i <= 3 {
			ports = append(ports, struct {
				port int
				what string
			}{ctrl(i), "controller"})
		}
		for _, p := range ports {
			if err := portFree(p.port); err != nil {
				return fmt.Errorf("broker %d cannot start: port %d (its %s listener) is in use: %v (choose another --base-port)", i, p.port, p.what, err)
			}
		}
	}
	if *withS3 {
		if err := portFree(*basePort + 300); err != nil {
			return fmt.Errorf("the S3 server cannot start: port %d is in use: %v (choose another --base-port)", *basePort+300, err)
		}
	}
	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		return err
	}
	// Absolute, so the restart command printed for a dead broker works
	// from any directory.
	if abs, err := filepath.Abs(*dataDir); err == nil {
		*dataDir = abs
	}
	var extra string
	var s3 *devS3
	if *withS3 {
		var err error
		if s3, err = startDevS3(*dataDir, *basePort+300); err != nil {
			return err
		}
		defer s3.close() // after every broker stopped
		extra = s3.properties()
	}
	props, err := devProperties(*n, *cfgFile, extra)
	if err != nil {
		return err
	}
	propsPath := filepath.Join(*dataDir, "dev.properties")
	if err := os.WriteFile(propsPath, []byte(props), 0o644); err != nil {
		return err
	}
	var voters []string
	for i := 1; i <= min(*n, 3); i++ {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i, ctrl(i)))
	}
	c := &devCluster{self: self, exited: make(chan *devBroker, 2**n)}
	var bootstrap []string
	for i := 1; i <= *n; i++ {
		b := &devBroker{id: i, kafka: "127.0.0.1:" + strconv.Itoa(kafka(i))}
		b.args = []string{"serve", "--node-id", strconv.Itoa(i),
			"--listen", b.kafka,
			"--data-dir", filepath.Join(*dataDir, "broker-"+strconv.Itoa(i)),
			"--http", "127.0.0.1:" + strconv.Itoa(http(i)),
			"--voters", strings.Join(voters, ","),
			"--config", propsPath}
		if i <= 3 {
			b.args = append(b.args, "--controller-listen", "127.0.0.1:"+strconv.Itoa(ctrl(i)))
		}
		c.brokers = append(c.brokers, b)
		bootstrap = append(bootstrap, b.kafka)
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	for _, b := range c.brokers {
		if err := c.start(b); err != nil {
			c.stopAll()
			return err
		}
	}
	if err := c.waitStarted(60*time.Second, sig); err != nil {
		c.stopAll()
		return err
	}
	// "ready" promises that a topic of replication factor up to n can be
	// created: every broker registered and unfenced, not only listening.
	if err := c.waitRegistered(60*time.Second, sig); err != nil {
		c.stopAll()
		return err
	}
	c.printf("sluice dev: %d brokers\nbootstrap: %s\nstatus: http://127.0.0.1:%d/status\n", *n, strings.Join(bootstrap, ","), http(1))
	if s3 != nil {
		c.printf("s3: %s bucket %s (objects in %s); tiered storage is on: create topics with remote.storage.enable=true\n",
			s3.Endpoint, devS3Bucket, filepath.Join(*dataDir, "s3"))
	}
	for _, b := range c.brokers {
		c.printf("broker %d: pid %d, kafka %s\n", b.id, b.pid(), b.kafka)
	}
	c.printf("sluice dev: ready. Commands on stdin: restart N, stop N, status. Ctrl-C stops every broker.\n")
	cmds := make(chan string)
	go readCommands(os.Stdin, cmds)
	for {
		select {
		case <-sig:
			c.printf("sluice dev: stopping every broker (controlled shutdown, one at a time)\n")
			go func() {
				<-sig
				c.printf("sluice dev: second signal: killing every broker\n")
				for _, b := range c.brokers {
					if p := b.pid(); p != 0 && b.running() {
						syscall.Kill(p, syscall.SIGKILL)
					}
				}
			}()
			c.stopAll()
			return nil
		case b := <-c.exited:
			c.errorf("sluice dev: broker %d exited (%s); the others keep running. Restart it by typing 'restart %d', or run:\n  %s\n",
				b.id, b.cmd.ProcessState, b.id, shellQuote(append([]string{c.self}, b.args...)))
		case line, ok := <-cmds:
			if !ok {
				cmds = nil // stdin closed: keep running until a signal
				continue
			}
			c.command(line)
		}
	}
}

// devProperties returns the server.properties every dev broker reads:
// replication defaults sized to the cluster, then extra (the --s3
// settings), then the user's --config file (validated here so that its
// errors name it), whose keys win.
func devProperties(n int, userFile, extra string) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Written by sluice dev: defaults for a %d-broker cluster", n)
	if userFile != "" {
		fmt.Fprintf(&sb, ", then %s", userFile)
	}
	sb.WriteString(".\n")
	fmt.Fprintf(&sb, "default.replication.factor=%d\nmin.insync.replicas=%d\noffsets.topic.replication.factor=%d\n", min(3, n), min(2, n), min(3, n))
	if extra != "" {
		fmt.Fprintf(&sb, "\n# --s3: tiered storage on dev's S3 server\n%s", extra)
	}
	if userFile != "" {
		if err := config.Defaults().LoadFile(userFile); err != nil {
			return "", err
		}
		text, err := os.ReadFile(userFile)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&sb, "\n# %s\n%s\n", userFile, text)
	}
	return sb.String(), nil
}

// start starts broker b's process; its output lines are prefixed with
// [broker N].
func (c *devCluster) start(b *devBroker) error {
	cmd := exec.Command(c.self, b.args...)
	cmd.Stdout = &lineWriter{c: c, prefix: fmt.Sprintf("[broker %d] ", b.id), w: os.Stdout}
	cmd.Stderr = &lineWriter{c: c, prefix: fmt.Sprintf("[broker %d] ", b.id), w: os.Stderr}
	// The brokers stop (controlled shutdown) if dev itself dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("broker %d: %w", b.id, err)
	}
	done := make(chan struct{})
	b.mu.Lock()
	b.cmd, b.done = cmd, done
	b.mu.Unlock()
	go func() {
		cmd.Wait()
		close(done)
		c.exited <- b
	}()
	return nil
}

// waitStarted waits until every broker's Kafka port accepts connections.
// A broker that exits first (a port taken, a bad --config) is an error.
func (c *devCluster) waitStarted(timeout time.Duration, sig <-chan os.Signal) error {
	deadline := time.Now().Add(timeout)
	for _, b := range c.brokers {
		for {
			select {
			case x := <-c.exited:
				return fmt.Errorf("broker %d could not start (%s); its log is above", x.id, x.cmd.ProcessState)
			case s := <-sig:
				return fmt.Errorf("interrupted (%s) while the brokers started", s)
			default:
			}
			conn, err := net.DialTimeout("tcp", b.kafka, 200*time.Millisecond)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("broker %d did not open %s within %v", b.id, b.kafka, timeout)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// command runs one line typed on stdin.
func (c *devCluster) command(line string) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return
	}
	broker := func() *devBroker {
		if len(f) != 2 {
			c.errorf("sluice dev: usage: %s N\n", f[0])
			return nil
		}
		i, err := strconv.Atoi(f[1])
		if err != nil || i < 1 || i > len(c.brokers) {
			c.errorf("sluice dev: no broker %q (1-%d)\n", f[1], len(c.brokers))
			return nil
		}
		return c.brokers[i-1]
	}
	switch f[0] {
	case "restart":
		if b := broker(); b != nil {
			if b.running() {
				c.errorf("sluice dev: broker %d is running (pid %d); 'stop %d' first\n", b.id, b.pid(), b.id)
				return
			}
			if err := c.start(b); err != nil {
				c.errorf("sluice dev: %v\n", err)
				return
			}
			c.printf("sluice dev: broker %d restarted: pid %d\n", b.id, b.pid())
		}
	case "stop":
		if b := broker(); b != nil && b.running() {
			syscall.Kill(b.pid(), syscall.SIGTERM)
		}
	case "status":
		for _, b := range c.brokers {
			state := "exited"
			if b.running() {
				state = "running"
			}
			c.printf("broker %d: %s, pid %d, kafka %s\n", b.id, state, b.pid(), b.kafka)
		}
	default:
		c.errorf("sluice dev: unknown command %q (restart N, stop N, status)\n", f[0])
	}
}

// stopAll stops the brokers one at a time, highest id first, each with a
// controlled shutdown (SIGTERM) so its leaderships move to brokers that
// keep running; stopping them all at once would leave leadership nowhere
// to go. Brokers that died are first waited out until the controller has
// fenced them (they leave Metadata), so no leadership moves onto a dead
// broker. A broker still running 40 s after its SIGTERM is killed.
func (c *devCluster) stopAll() {
	var dead []int32
	for _, b := range c.brokers {
		if !b.running() {
			dead = append(dead, int32(b.id))
		}
	}
	if len(dead) > 0 && len(dead) < len(c.brokers) {
		c.waitFenced(dead, 15*time.Second)
	}
	for i := len(c.brokers) - 1; i >= 0; i-- {
		b := c.brokers[i]
		if !b.running() {
			continue
		}
		syscall.Kill(b.pid(), syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(40 * time.Second):
			c.errorf("sluice dev: broker %d still running 40 s after SIGTERM: killing it\n", b.id)
			syscall.Kill(b.pid(), syscall.SIGKILL)
			<-b.done
		}
	}
}

// waitRegistered waits until the cluster's Metadata lists every broker
// (each registered with the controller and unfenced), a broker exits, a
// signal comes, or timeout passes.
func (c *devCluster) waitRegistered(timeout time.Duration, sig <-chan os.Signal) error {
	var seeds []string
	for _, b := range c.brokers {
		seeds = append(seeds, b.kafka)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	listed := 0
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		rcancel()
		if err == nil {
			if listed = len(resp.Brokers); listed >= len(c.brokers) {
				return nil
			}
		}
		select {
		case x := <-c.exited:
			return fmt.Errorf("broker %d exited (%s) before every broker registered; its log is above", x.id, x.cmd.ProcessState)
		case s := <-sig:
			return fmt.Errorf("interrupted (%s) while the brokers registered", s)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d brokers registered with the controller within %v", listed, len(c.brokers), timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitFenced waits until no running broker's Metadata lists the dead ones
// (the controller fenced them), or until timeout.
func (c *devCluster) waitFenced(dead []int32, timeout time.Duration) {
	var seeds []string
	for _, b := range c.brokers {
		if b.running() {
			seeds = append(seeds, b.kafka)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return
	}
	defer cl.Close()
	c.printf("sluice dev: waiting until the controller has fenced broker(s) %v before stopping the others\n", dead)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for ctx.Err() == nil {
		req := kmsg.NewPtrMetadataRequest()
		if resp, err := req.RequestWith(ctx, cl); err == nil {
			listed := false
			for _, br := range resp.Brokers {
				listed = listed || slices.Contains(dead, br.NodeID)
			}
			if !listed {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// portFree reports an error if port cannot be bound on 127.0.0.1.
func portFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}

// readCommands sends each line of r to out and closes out at EOF.
func readCommands(r io.Reader, out chan<- string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		out <- sc.Text()
	}
	close(out)
}

func (c *devCluster) printf(format string, args ...any) {
	c.out.Lock()
	defer c.out.Unlock()
	fmt.Fprintf(os.Stdout, format, args...)
}

func (c *devCluster) errorf(format string, args ...any) {
	c.out.Lock()
	defer c.out.Unlock()
	fmt.Fprintf(os.Stderr, format, args...)
}

// lineWriter writes whole lines to w, each with a prefix, holding the
// cluster's output lock so lines of different brokers do not interleave.
type lineWriter struct {
	c      *devCluster
	prefix string
	w      io.Writer
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.c.out.Lock()
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf[:i])
		l.c.out.Unlock()
		l.buf = l.buf[i+1:]
	}
}

// shellQuote joins args into a command line a POSIX shell runs as is.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_") == "" {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
