package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRateLimit(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	h := RateLimit(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}), 10*time.Second, func() time.Time { return now })
	log := slog.New(h)
	for i := 0; i < 5; i++ {
		log.Warn("fetch failed", "offset", i) // the same line, other values
	}
	log.Error("fetch failed")          // another level: its own line
	log.Info("step done", "step", "a") // INFO always passes
	log.Info("step done", "step", "b")
	log.With("node", 2).Warn("fetch failed") // another logger: its own line
	now = now.Add(11 * time.Second)
	log.Warn("fetch failed", "offset", 9) // after the window, with the count
	log.Warn("fetch failed", "offset", 10)
	got := strings.TrimSpace(buf.String())
	want := strings.Join([]string{
		`level=WARN msg="fetch failed" offset=0`,
		`level=ERROR msg="fetch failed"`,
		`level=INFO msg="step done" step=a`,
		`level=INFO msg="step done" step=b`,
		`level=WARN msg="fetch failed" node=2`,
		`level=WARN msg="fetch failed" offset=9 suppressed=4`,
	}, "\n")
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
