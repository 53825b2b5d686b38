package node

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/controller"
	"github.com/sluice-io/sluice/internal/metadata"
)

// controlledShutdown runs Kafka's controlled shutdown before the node
// stops (controlled.shutdown.enable): the controller moves this node's
// leaderships away and takes it out of every ISR while it still serves.
// It is bounded like Kafka's: 1 + controlled.shutdown.max.retries
// attempts, each waiting controlled.shutdown.retry.backoff.ms for the
// grant. It gives up at once when no controller quorum is reachable
// (controller.ErrQuorumUnreachable, after a few seconds without any
// answer), and when forced is closed (a second signal). It reports
// whether the controller should then close at once (Node.CloseNow: no
// leadership hand-over, no wait on unresponsive peers): after a second
// signal or with no quorum reachable.
func controlledShutdown(cfg *config.Broker, b *broker.Broker, logger *slog.Logger, forced <-chan struct{}) (closeNow bool) {
	if !cfg.Bool("controlled.shutdown.enable", true) {
		logger.Info("controlled shutdown disabled (controlled.shutdown.enable=false)")
		select {
		case <-forced:
			return true
		default:
			return false
		}
	}
	retries := max(cfg.Int("controlled.shutdown.max.retries", 3), 0)
	backoff := time.Duration(max(cfg.Int("controlled.shutdown.retry.backoff.ms", 5000), 0)) * time.Millisecond
	t0 := time.Now()
	for attempt := int64(0); attempt <= retries; attempt++ {
		res := make(chan error, 1)
		go func() { res <- b.ControlledShutdown(max(backoff, 100*time.Millisecond)) }()
		var err error
		select {
		case err = <-res:
		case <-forced:
			logger.Warn("controlled shutdown abandoned: second signal", "took", time.Since(t0).Round(time.Millisecond))
			return true
		}
		if err == nil {
			logger.Info("controlled shutdown granted", "took", time.Since(t0).Round(time.Millisecond))
			return false
		}
		if errors.Is(err, controller.ErrQuorumUnreachable) {
			logger.Warn("controlled shutdown skipped: no controller quorum reachable; stopping without moving leadership",
				"err", err, "took", time.Since(t0).Round(time.Millisecond))
			return true
		}
		if attempt < retries {
			logger.Warn("controlled shutdown not granted yet; retrying (controlled.shutdown.max.retries)",
				"attempt", attempt+1, "of", retries+1, "err", err)
		} else {
			logger.Warn("controlled shutdown not granted; stopping anyway",
				"attempts", retries+1, "err", err, "took", time.Since(t0).Round(time.Millisecond))
		}
	}
	return false
}

// quorumWarnInterval is how often a node that cannot reach its controller
// quorum says so.
const quorumWarnInterval = 10 * time.Second

// watchQuorum logs a warning every quorumWarnInterval while no active
// controller has answered this node for that long (for example a
// broker-only node started before its voters, or with wrong --voters),
// and one line when contact is made again. It returns when stop closes.
func watchQuorum(ctrl metadata.Controller, cfg *config.Broker, logger *slog.Logger, stop <-chan struct{}) {
	n, ok := ctrl.(*controller.Node)
	if !ok {
		return
	}
	started := time.Now()
	t := time.NewTicker(quorumWarnInterval)
	defer t.Stop()
	warned := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		last := n.LastContact()
		if last.IsZero() {
			last = started
		}
		if silent := time.Since(last); silent >= quorumWarnInterval {
			var voters []string
			for _, v := range cfg.Voters {
				voters = append(voters, v.Addr)
			}
			logger.Warn("cannot reach the controller quorum: this node is not registered or heartbeating; check that the voters are running and --voters is right",
				"voters", voters, "silent", silent.Round(time.Second), "registered", !n.LastContact().IsZero())
			warned = true
		} else if warned {
			logger.Info("controller quorum reachable again")
			warned = false
		}
	}
}
