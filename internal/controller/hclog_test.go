package controller

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestRaftLogger: raft's lines reach slog at their own level, with slog's
// timestamp only, and below the slog level nothing is logged.
func TestRaftLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := newRaftLogger(l)
	h.Debug("hidden")
	h.Info("entering follower state", "follower", "x")
	h.Warn("heartbeat timeout reached")
	h.Error("failed to contact", "id", 2)
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="entering follower state" lib=raft follower=x`,
		`level=WARN msg="heartbeat timeout reached" lib=raft`,
		`level=ERROR msg="failed to contact" lib=raft id=2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") || strings.Contains(out, "@timestamp") || strings.Count(out, "time=") != 3 {
		t.Errorf("unexpected output:\n%s", out)
	}
}
