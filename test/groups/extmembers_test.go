package groups

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

// procMember is a group member running as an external process that prints
// one consumed value per line on stdout and leaves the group cleanly on
// SIGTERM.
type procMember struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{} // stdout drained
	stderr *tailBuffer
}

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 8<<10 {
		b.buf = b.buf[len(b.buf)-8<<10:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// startProc runs name args... with env added, passing every stdout line
// that starts with prefix to onLine.
func startProc(t *testing.T, member, prefix string, onLine func(string), env []string, name string, args ...string) *procMember {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m := &procMember{name: member, cmd: cmd, done: make(chan struct{}), stderr: &tailBuffer{}}
	cmd.Stderr = m.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-m.done
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", member, m.stderr.String())
		}
	})
	go func() {
		defer close(m.done)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if v := strings.TrimSpace(line); strings.HasPrefix(v, prefix) {
				onLine(v)
			}
			if err != nil {
				if err != io.EOF {
					t.Logf("%s: reading stdout: %v", member, err)
				}
				return
			}
		}
	}()
	return m
}

func (m *procMember) stop(t *testing.T) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not exit within 30s of SIGTERM; killing it\n%s", m.name, m.stderr.String())
		m.cmd.Process.Kill()
		<-m.done
	}
	err := m.cmd.Wait()
	if err != nil {
		// kcat exits non-zero when signalled in some versions; what
		// matters is that it left the group and committed, which the
		// scenario checks.
		t.Logf("%s exited: %v", m.name, err)
	}
}

// --- kcat -G: librdkafka's balanced consumer ---

func startKcat(t *testing.T, c *cluster, name, group, topic string, rec *recorder) member {
	kcat := testproc.RequireTool(t, "kcat")
	// kcat drops the message it polls right after a signal (consume_cb
	// returns early once conf.run is cleared) although librdkafka has
	// already stored its offset, and the unassign commits it: an
	// at-most-once window in kcat, not the broker (librdkafka debug logs
	// show "stored offset=335" for a record at 334 that was never printed,
	// then OffsetCommit 335). The member that leaves by SIGTERM (m2)
	// therefore neither stores nor commits offsets; its partitions resume
	// from the other members' commits (redelivery, allowed).
	commit := "true"
	if name == "m2" {
		commit = "false"
	}
	store := commit
	return startProc(t, name, "v-", func(v string) { rec.add(name, v) }, nil, kcat,
		"-b", c.bootstrap(), "-G", group, "-q", "-u", "-f", "%s\n",
		"-X", "enable.auto.commit="+commit,
		"-X", "enable.auto.offset.store="+store,
		"-X", "client.id="+name,
		"-X", "auto.offset.reset=earliest",
		"-X", "session.timeout.ms=6000",
		"-X", "heartbeat.interval.ms=500",
		"-X", "max.poll.interval.ms=20000",
		"-X", "auto.commit.interval.ms=200",
		"-X", "fetch.wait.max.ms=200",
		"-X", "topic.metadata.refresh.interval.ms=2000",
		topic)
}

func TestMembershipKcat(t *testing.T) {
	testproc.RequireTool(t, "kcat")
	runMembership(t, startKcat)
}

// --- KafkaJS: consumer.run in a group ---

// kafkajsModules is test/compat/kafkajs/node_modules (kafkajs 2.2.4,
// installed by scripts/install-test-deps.sh), which kafkajs/group.js
// loads through NODE_PATH.
func kafkajsModules(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "compat", "kafkajs", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kafkajs", "package.json")); err != nil {
		msg := "test/compat/kafkajs/node_modules missing: run scripts/install-test-deps.sh (npm ci)"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (CI=%q)", msg, os.Getenv("CI"))
		}
		t.Skip(msg + "; skipped outside CI")
	}
	return dir
}

func startKafkaJS(t *testing.T, c *cluster, name, group, topic string, rec *recorder) member {
	node := testproc.RequireTool(t, "node")
	modules := kafkajsModules(t)
	script, err := filepath.Abs(filepath.Join("kafkajs", "group.js"))
	if err != nil {
		t.Fatal(err)
	}
	return startProc(t, name, "v-", func(v string) { rec.add(name, v) }, []string{"NODE_PATH=" + modules}, node, script,
		"--brokers", c.bootstrap(), "--group", group, "--topic", topic, "--client-id", name)
}

func TestMembershipKafkaJS(t *testing.T) {
	testproc.RequireTool(t, "node")
	kafkajsModules(t)
	runMembership(t, startKafkaJS)
}
