package storage

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// The one writer of a log.
//
// The broker makes each partition's owner (internal/broker, owner.go) the
// only writer of the partition's log: appends, truncations, the log start,
// retention, the flush completions (the flushed offset and the recovery
// point) and the cleaner's segment swaps all run as the owner's steps.
// The actors that do slow work beside it — the flusher's fsyncs, the
// cleaner's pass that reads the log and writes the cleaned segments off to
// the side — hand their result to the owner, which checks that nothing
// changed underneath and applies it (docs/storage.md, "One writer").
//
// SetWriter installs the hand-off. A log without one (tests, tools,
// benchmarks) applies those results on the caller's goroutine, as one
// writer by construction when the caller is one goroutine.

// Writer is how a Log reaches its one writer.
type Writer struct {
	// Run runs fn as the log's writer and returns once it has run. The
	// cleaner applies each of its swaps through it.
	Run func(fn func())
	// Check, if not nil, reports whether the caller is the log's writer.
	// Every method that changes the log asks it and counts a violation
	// when it says no (Violations): a test aid; nil in production.
	Check func() bool
}

// writerState is the installed Writer and the violations it counted.
type writerState struct {
	w          atomic.Pointer[Writer]
	violations atomic.Int64
	ops        sync.Map // op name → *atomic.Int64, the violations of each change
}

// SetWriter installs w as the log's writer (see Writer).
func (l *Log) SetWriter(w Writer) { l.writer.w.Store(&w) }

// WriterViolations returns how many changes of the log ran on another
// goroutine than its writer's (Writer.Check said no) and which changes
// they were, with their counts ("ApplyRetention×3 ...").
func (l *Log) WriterViolations() (int64, string) {
	var ops []string
	l.writer.ops.Range(func(k, v any) bool {
		ops = append(ops, fmt.Sprintf("%s×%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(ops)
	return l.writer.violations.Load(), fmt.Sprint(ops)
}

// checkWriter counts a violation if a Writer.Check is installed and the
// caller is not the writer; op names the change.
func (l *Log) checkWriter(op string) {
	w := l.writer.w.Load()
	if w == nil || w.Check == nil || w.Check() {
		return
	}
	l.writer.violations.Add(1)
	n, _ := l.writer.ops.LoadOrStore(op, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// asWriter runs fn as the log's writer: through Writer.Run when one is
// installed, else on the caller's goroutine.
func (l *Log) asWriter(fn func()) {
	if w := l.writer.w.Load(); w != nil && w.Run != nil {
		w.Run(fn)
		return
	}
	fn()
}
