// Package cli runs the admin commands of the sluice binary as
// processes against real `sluice serve` brokers over TCP, and checks their
// table and --json output, their exit statuses and their effect as seen
// by a separate franz-go client.
//
// Run: go test ./test/cli -v -count=1
package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// result is one run of the binary.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return "sluice " + strings.Join(r.args, " ") + "\nexit " + itoa(r.code) + "\n--- stdout:\n" + r.stdout + "--- stderr:\n" + r.stderr
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// cli runs the sluice binary with args (and stdin, if not empty), bounded
// by a minute.
func cli(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	bin := testproc.Build(t)
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("sluice %s: still running after a minute\n%s%s", strings.Join(args, " "), out.String(), errb.String())
	}
	r := result{args: args, stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// ok runs the binary and fails the test unless it exits 0.
func ok(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	r := cli(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("expected exit 0:\n%s", r)
	}
	return r
}

// fails runs the binary and fails the test unless it exits with code and
// its standard error contains want.
func fails(t *testing.T, code int, want string, args ...string) result {
	t.Helper()
	r := cli(t, "", args...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		t.Fatalf("expected exit %d and %q on stderr:\n%s", code, want, r)
	}
	return r
}

// jsonOut runs the binary with --json, expecting exit 0, and decodes its
// standard output (which must be one JSON document) into v.
func jsonOut(t *testing.T, v any, args ...string) result {
	t.Helper()
	r := ok(t, "", append(args, "--json")...)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding the JSON output: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", r)
	}
	return r
}

// lines splits a table into its lines' fields.
func lines(s string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.Fields(l))
	}
	return out
}

// row returns the first line of a table whose first fields are prefix.
func row(s string, prefix ...string) []string {
	for _, f := range lines(s) {
		if len(f) >= len(prefix) && equal(f[:len(prefix)], prefix) {
			return f
		}
	}
	return nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
