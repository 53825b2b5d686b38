package dirlock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain doubles as the lock holder for TestOtherProcess: with
// DIRLOCK_HOLD set, the test binary takes the lock, says so and holds it
// until stdin closes.
func TestMain(m *testing.M) {
	if dir := os.Getenv("DIRLOCK_HOLD"); dir != "" {
		if _, err := Acquire(dir); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("LOCKED")
		os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestOtherProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DIRLOCK_HOLD="+dir)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "LOCKED") && !strings.Contains(got.String(), "ERR") {
		n, err := out.Read(buf)
		if err != nil {
			t.Fatalf("helper: %v (%s)", err, got.String())
		}
		got.Write(buf[:n])
	}
	_, err := Acquire(dir)
	want := fmt.Sprintf("data directory %s is in use by pid %d", dir, cmd.Process.Pid)
	var inUse *InUseError
	if !errors.As(err, &inUse) || err.Error() != want {
		t.Fatalf("second Acquire: %v, want %q", err, want)
	}
	// The holder exits: its lock goes with it, whatever the file says.
	stdin.Close()
	cmd.Wait()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("after the holder exited: %v", err)
	}
	l.Release()
}

func TestReacquireAfterRelease(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.Dir() != dir {
		t.Fatal(l.Dir())
	}
	// flock locks are per open file description: a second open in the
	// same process conflicts too.
	var inUse *InUseError
	if _, err := Acquire(dir); !errors.As(err, &inUse) {
		t.Fatalf("second Acquire in process: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	l2.Release()
}
