package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-io/sluice/internal/objstore"
)

// Bounds of the object store's reachability checks (watchRemoteStore).
const (
	remoteCheckTimeout = 10 * time.Second
	remoteCheckFirst   = 5 * time.Second
	remoteCheckMax     = 5 * time.Minute
)

// watchRemoteStore checks, from the start, that tiered storage's object
// store is reachable, its bucket exists and the credentials are accepted
// (objstore.S3.Check). A failure does not stop the node: the head of
// every log keeps serving and uploads retry later (Kafka's
// RemoteLogManager does the same), so it is an ERROR line naming the
// cause, repeated with a backoff from 5 s to 5 minutes until a check
// passes, which is logged once. It returns when stop is closed.
func watchRemoteStore(s *objstore.S3, logger *slog.Logger, stop <-chan struct{}) {
	wait := remoteCheckFirst
	failing := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), remoteCheckTimeout)
		go func() {
			select {
			case <-stop:
			case <-ctx.Done():
			}
			cancel()
		}()
		err := s.Check(ctx)
		cancel()
		select {
		case <-stop:
			return
		default:
		}
		switch {
		case err == nil && failing:
			logger.Info("remote storage reachable again: tiered storage uploads resume", "store", s.String())
		case err == nil:
			logger.Info("remote storage reachable", "store", s.String())
		default:
			logger.Error("remote storage unavailable: tiered storage cannot upload or read remote segments (local segments are kept until uploaded; the broker keeps serving)",
				"store", s.String(), "err", err, "retry_in", wait)
		}
		if err == nil {
			return
		}
		failing = true
		t := time.NewTimer(wait)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, remoteCheckMax)
	}
}
