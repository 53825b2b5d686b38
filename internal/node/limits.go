package node

import (
	"log/slog"
	"syscall"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/vfs"
)

// minOpenFiles is the smallest segment-file cache (log.max.open.files).
const minOpenFiles = 64

// raiseFileLimit raises the soft RLIMIT_NOFILE to the hard limit (the Go
// runtime does this at start too; this makes it explicit and logged) and
// returns the soft limit in force.
func raiseFileLimit(log *slog.Logger) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("reading the open-file limit", "err", err)
		return 0
	}
	before := lim.Cur
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("raising the open-file limit", "soft", before, "hard", lim.Max, "err", err)
			lim.Cur = before
		}
	}
	log.Info("open-file limit (RLIMIT_NOFILE)", "soft", lim.Cur, "hard", lim.Max, "soft_at_start", before)
	return lim.Cur
}

// fileCache puts the data directory's files behind a bounded descriptor
// cache (vfs.WithHandleCache): log.max.open.files, or a quarter of the
// soft limit, so that descriptors grow with the files in use rather than
// with every partition, and client connections (max.connections) keep the
// rest.
func fileCache(fsys vfs.FS, cfg *config.Broker, soft uint64, log *slog.Logger) vfs.FS {
	n := int(cfg.Int("log.max.open.files", 0))
	if n == 0 {
		n = max(minOpenFiles, int(min(soft/4, 1<<30)))
	}
	c := vfs.WithHandleCache(fsys, n)
	metrics.SetOpenFiles(func() int { return c.Stats().Open })
	log.Info("segment file cache", "log.max.open.files", n)
	return c
}
