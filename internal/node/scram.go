package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/security"
)

// bootstrapScram creates the credentials of
// sluice.scram.bootstrap.credentials that the metadata lacks, through the
// controller, once this node is caught up; it retries every second until
// done or stop closes.
func bootstrapScram(cfg *config.Broker, b *broker.Broker, logger *slog.Logger, stop <-chan struct{}) {
	v, ok := cfg.Props["sluice.scram.bootstrap.credentials"]
	if !ok || v == "" {
		return
	}
	creds, err := config.ParseScramBootstrap(v) // validated at start
	if err != nil {
		return
	}
	sa, ok := b.Controller().(metadata.ScramAlterer)
	if !ok {
		return
	}
	for {
		if b.CaughtUp() {
			var ops []metadata.ScramOp
			img := b.Image()
			for _, c := range creds {
				if _, have := img.ScramCredentialOf(c.User, c.Mechanism); have {
					continue
				}
				cred, err := security.NewScramCredential(c.Mechanism, c.Password, c.Iterations)
				if err != nil {
					logger.Error("sluice.scram.bootstrap.credentials", "user", c.User, "err", err)
					continue
				}
				ops = append(ops, metadata.ScramOp{User: c.User, Mechanism: c.Mechanism, Cred: cred})
			}
			if len(ops) == 0 {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			errs, err := sa.AlterScramCredentials(ctx, ops)
			cancel()
			if err == nil {
				for i, op := range ops {
					if errs[i] != nil {
						logger.Warn("SCRAM bootstrap credential not created", "user", op.User, "mechanism", op.Mechanism, "err", errs[i])
					} else {
						logger.Info("SCRAM bootstrap credential created", "user", op.User, "mechanism", op.Mechanism)
					}
				}
				return
			}
			logger.Debug("SCRAM bootstrap: retrying", "err", err)
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}
