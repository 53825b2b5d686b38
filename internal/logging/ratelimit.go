// Package logging holds the slog plumbing of `sluice serve`: a handler
// that rate-limits repeated lines, so that a condition that repeats (a
// peer down, a fetch failing every backoff) logs once per window with a
// count instead of flooding the log.
package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxKeys bounds the lines remembered; past it the memory is cleared
// (worst case: a few repeats more get through).
const maxKeys = 4096

// RateLimit wraps h so that WARN and ERROR records with the same level,
// message and logger attributes are written at most once per window: the
// first one at once, the later ones counted, and the next one written
// after the window carries suppressed=N. Each distinct line is limited on
// its own; INFO and DEBUG records (start, shutdown steps, summaries) always
// pass. now is the clock (time.Now when nil).
func RateLimit(h slog.Handler, window time.Duration, now func() time.Time) slog.Handler {
	if now == nil {
		now = time.Now
	}
	return &limiter{h: h, s: &limitState{window: window, now: now, seen: map[string]*lineState{}}}
}

type limitState struct {
	window time.Duration
	now    func() time.Time
	mu     sync.Mutex
	seen   map[string]*lineState
}

type lineState struct {
	last       time.Time // when it was last written
	suppressed int
}

type limiter struct {
	h      slog.Handler
	s      *limitState
	prefix string // identifies the logger's WithAttrs/WithGroup
}

func (l *limiter) Enabled(ctx context.Context, level slog.Level) bool { return l.h.Enabled(ctx, level) }

func (l *limiter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return l.h.Handle(ctx, r)
	}
	key := l.prefix + "\x00" + r.Level.String() + "\x00" + r.Message
	s := l.s
	s.mu.Lock()
	now := s.now()
	st := s.seen[key]
	if st != nil && now.Sub(st.last) < s.window {
		st.suppressed++
		s.mu.Unlock()
		return nil
	}
	suppressed := 0
	if st == nil {
		if len(s.seen) >= maxKeys {
			clear(s.seen)
		}
		st = &lineState{}
		s.seen[key] = st
	} else {
		suppressed = st.suppressed
	}
	st.last, st.suppressed = now, 0
	s.mu.Unlock()
	if suppressed > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("suppressed", suppressed))
	}
	return l.h.Handle(ctx, r)
}

func (l *limiter) WithAttrs(attrs []slog.Attr) slog.Handler {
	p := l.prefix
	for _, a := range attrs {
		p += "\x01" + a.String()
	}
	return &limiter{h: l.h.WithAttrs(attrs), s: l.s, prefix: p}
}

func (l *limiter) WithGroup(name string) slog.Handler {
	return &limiter{h: l.h.WithGroup(name), s: l.s, prefix: l.prefix + "\x02" + name}
}
