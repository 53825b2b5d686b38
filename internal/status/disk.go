package status

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-io/sluice/internal/vfs"
)

// DiskState is the JSON shape of GET /debug/disk.
type DiskState struct {
	Mode    string `json:"mode"`    // ok, slow or fail
	DelayMs int64  `json:"delayMs"` // slow mode's delay (0 otherwise)
	// Fired counts the operations slowed or failed since the process
	// started (all modes together).
	Fired int64 `json:"fired"`
}

// DiskFaultHandler serves /debug/disk, the fault-injection switch of a
// node's data directory (cmd/sluice mounts it only when
// SLUICE_FAULT_INJECTION=1; see docs/storage.md):
//
//	POST /debug/disk?mode=ok                 no fault
//	POST /debug/disk?mode=slow&delay=200ms   writes and fsyncs sleep delay first (capped at 10s)
//	POST /debug/disk?mode=fail               writes, fsyncs, truncations and creations fail with EIO
//	GET  /debug/disk                         {"mode":"slow","delayMs":200,"fired":123}
//
// delay is a Go duration ("200ms", "1s") or a number of milliseconds. A
// POST answers 200 with the new state (sent before the switch, so that a
// failing disk's halt cannot cut the answer off); a bad request gets 400.
func DiskFaultHandler(d *vfs.DiskFaults) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode, delay, fired := d.State()
		set := false
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPost:
			var err error
			if mode, err = vfs.ParseDiskMode(r.FormValue("mode")); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			delay = 0
			if mode == vfs.DiskSlow {
				if delay, err = parseDelay(r.FormValue("delay")); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
			}
			set = true
		default:
			w.Header().Set("Allow", "GET, POST")
			http.Error(w, "use GET or POST", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(DiskState{Mode: mode.String(), DelayMs: delay.Milliseconds(), Fired: fired})
		if set {
			// Answer first: a failing disk halts the process within
			// microseconds, which must not eat the response.
			http.NewResponseController(w).Flush()
			d.Set(mode, delay)
		}
	})
}

// parseDelay reads a slow-mode delay: a Go duration or milliseconds,
// capped at vfs.MaxDiskDelay.
func parseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, err2 := strconv.ParseInt(s, 10, 64)
		if err2 != nil {
			return 0, fmt.Errorf("delay %q: want a positive duration such as 200ms", s)
		}
		d = time.Duration(min(ms, int64(vfs.MaxDiskDelay/time.Millisecond))) * time.Millisecond
	}
	if d <= 0 {
		return 0, fmt.Errorf("delay %q: want a positive duration such as 200ms", s)
	}
	return min(d, vfs.MaxDiskDelay), nil
}

// WithDiskFaults serves DiskFaultHandler(d) at /debug/disk and everything
// else with h. With d nil it returns h, where /debug/disk does not exist.
func WithDiskFaults(h http.Handler, d *vfs.DiskFaults) http.Handler {
	if d == nil {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/disk", DiskFaultHandler(d))
	mux.Handle("/", h)
	return mux
}
