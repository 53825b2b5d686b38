package console

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// screenshotDir is where the PNGs go: $SLUICE_SCREENSHOT_DIR if set, else
// a temporary directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("SLUICE_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// chromiumArgs are the flags of every run: headless, no sandbox (tests run
// as root in containers), a fresh profile, and 3 s of virtual time for the
// page's script to render and poll.
func chromiumArgs(t *testing.T, extra ...string) []string {
	return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir(), "--window-size=1400,1000", "--virtual-time-budget=3000"}, extra...)
}

// runChromium runs chromium with args, bounded to 60 s, and returns its
// standard output.
func runChromium(t *testing.T, chromium string, args []string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, args...)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", chromium, args, err, stderr.b)
	}
	return out
}

// dumpDOM returns the page's DOM after its script ran.
func dumpDOM(t *testing.T, chromium, url string) string {
	t.Helper()
	return string(runChromium(t, chromium, chromiumArgs(t, "--dump-dom", url)))
}

// screenshot saves a PNG of the page as dir/name and checks it is one.
func screenshot(t *testing.T, chromium, url, dir, name string) {
	t.Helper()
	path := filepath.Join(dir, name)
	runChromium(t, chromium, chromiumArgs(t, "--screenshot="+path, url))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8 || string(b[1:4]) != "PNG" {
		t.Fatalf("%s is not a PNG (%d bytes)", path, len(b))
	}
	t.Logf("screenshot %s (%d KB)", path, len(b)/1024)
}

// limitedBuffer keeps the first 64 KB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
