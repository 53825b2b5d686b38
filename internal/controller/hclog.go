package controller

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger returns the hclog.Logger hashicorp/raft logs through: it
// writes JSON lines that slogWriter turns back into slog records, so raft's
// lines carry slog's level (TRACE and DEBUG as DEBUG, INFO, WARN, ERROR)
// and one timestamp (slog's; raft's own is dropped). raft logs only at the
// levels l has enabled.
func newRaftLogger(l *slog.Logger) hclog.Logger {
	level := hclog.Error
	for _, c := range []struct {
		s slog.Level
		h hclog.Level
	}{{slog.LevelWarn, hclog.Warn}, {slog.LevelInfo, hclog.Info}, {slog.LevelDebug, hclog.Debug}} {
		if l.Enabled(context.Background(), c.s) {
			level = c.h
		}
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:            "raft",
		Level:           level,
		Output:          slogWriter{l},
		JSONFormat:      true,
		DisableTime:     true,
		IncludeLocation: false,
	})
}

// slogWriter forwards hclog's JSON lines to slog at the matching level.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		w.forward(line)
	}
	return len(p), nil
}

func (w slogWriter) forward(line string) {
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		w.l.Warn(line, "lib", "raft")
		return
	}
	level := slog.LevelInfo
	switch rec["@level"] {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	msg, _ := rec["@message"].(string)
	args := []any{"lib", "raft"}
	for _, k := range slices.Sorted(maps.Keys(rec)) {
		if !strings.HasPrefix(k, "@") {
			args = append(args, k, rec[k])
		}
	}
	w.l.Log(context.Background(), level, msg, args...)
}
