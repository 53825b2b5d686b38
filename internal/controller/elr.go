package controller

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// Eligible leader replicas (KIP-966 part 1; Kafka's PartitionChangeBuilder
// maybePopulateTargetElr, tryElection, maybeUpdateLastKnownLeader and
// ReplicationControlManager.handleBrokerUncleanShutdown), on while the
// finalized eligible.leader.replicas.version is 1 (a new cluster's level):
//
//   - The leader's high watermark does not advance while the ISR is below
//     the topic's min.insync.replicas (strict min ISR, internal/replica).
//     So a replica that leaves the ISR while the ISR is below it holds
//     every committed record: every partition change whose new ISR is
//     below min.insync.replicas sets ELR := (ELR ∪ old ISR) − new ISR; one
//     at or above it clears ELR and LastKnownELR.
//   - The ISR may become empty (the last member fenced or shutting down
//     joins the ELR) instead of keeping its last member.
//   - Election order: an active ISR member; if the ISR is empty, an
//     active ELR member (it becomes the ISR and leaves the ELR); then,
//     only where unclean.leader.election.enable is true, the last known
//     leader if it is active, then the first active replica (ISR := {it},
//     recovering, ELR cleared).
//   - A broker registering without proof that its disk kept what it had
//     (uncleanRegistration) leaves every ELR.
//   - Changing a topic's min.insync.replicas clears its ELR and
//     LastKnownELR (the guarantee was made for the old value).
//
// The effective min.insync.replicas here is the replica machine's:
// min(min.insync.replicas, replication factor), so the two agree on when
// the high watermark stops.

// elrEnabled reports whether the image's finalized
// eligible.leader.replicas.version turns ELR on.
func elrEnabled(im *metadata.Image) bool {
	return im.FeatureLevel(metadata.FeatureELRVersion) >= 1
}

// effectiveMinISR is min(min.insync.replicas, replication factor), at
// least 1: the size below which the leader's high watermark stops
// (replica.Config.MinISR). The value is the topic's, else the image's
// cluster default (a dynamic config every node applies), else this
// node's server.properties; per-broker dynamic values are refused while
// ELR is on (checkMinISRChange).
func effectiveMinISR(im *metadata.Image, cfg *config.Broker, t *metadata.Topic, p *metadata.Partition) int {
	v, ok := t.Configs["min.insync.replicas"]
	if !ok {
		v, ok = im.BrokerConfigs[""]["min.insync.replicas"]
	}
	if !ok && cfg != nil {
		v, ok = cfg.Props["min.insync.replicas"]
	}
	m, err := strconv.Atoi(strings.TrimSpace(v))
	if !ok || err != nil {
		m = 1 // Kafka's default
	}
	return max(1, min(m, len(p.Replicas)))
}

// targetELR is the ELR a partition gets with ISR isr, before an election
// (maybePopulateTargetElr).
func targetELR(im *metadata.Image, cfg *config.Broker, t *metadata.Topic, p *metadata.Partition, isr []int32) []int32 {
	if !elrEnabled(im) || len(isr) >= effectiveMinISR(im, cfg, t, p) {
		return nil
	}
	var out []int32
	for _, s := range [][]int32{p.ELR, p.ISR} {
		for _, r := range s {
			if !has(isr, r) && !has(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// elrState computes the ELR and LastKnownELR of a partition change to
// leader, isr; unclean marks an unclean election, which clears both.
func elrState(im *metadata.Image, cfg *config.Broker, t *metadata.Topic, p *metadata.Partition, leader int32, isr []int32, unclean bool) (elr, lastKnown []int32) {
	if !elrEnabled(im) || unclean {
		return nil, nil
	}
	elr = targetELR(im, cfg, t, p, isr)
	if leader != noLeader {
		elr = without(elr, leader)
	}
	switch {
	case len(isr) >= effectiveMinISR(im, cfg, t, p) || leader != noLeader:
		return elr, nil
	case len(isr) == 0 && p.Leader != noLeader:
		// The partition becomes leaderless: remember its last leader
		// (maybeUpdateLastKnownLeader).
		return elr, []int32{p.Leader}
	}
	return elr, p.LastKnownELR
}

// uncleanRegistration reports whether a new registration of a broker
// cannot prove that its data directory kept everything it had: Kafka's
// previousBrokerEpoch (BrokerRegistrationRequest v3+) differs from the
// epoch of the registration it replaces, or the directory's id changed (a
// wiped or replaced directory). sluice fsyncs every record before it
// counts toward the high watermark, so a crash loses nothing committed;
// the broker epoch file (brokerEpochFile) is the proof that the directory
// is the one the broker ran on, as Kafka's clean shutdown file is.
func uncleanRegistration(im *metadata.Image, in registerReq) bool {
	prev, ok := im.Brokers[in.Broker.ID]
	if ok && prev.DirectoryID != "" && in.Broker.DirectoryID != "" && prev.DirectoryID != in.Broker.DirectoryID {
		return true
	}
	if in.PreviousEpoch == PreviousEpochKept {
		// The directory an earlier binary (which recorded no epoch)
		// ran on: its meta.properties, with the same directory id,
		// survived, so nothing committed was lost.
		return false
	}
	if !ok {
		return true
	}
	return in.PreviousEpoch <= 0 || in.PreviousEpoch != prev.Epoch
}

// checkMinISRChange refuses a per-broker dynamic min.insync.replicas
// while ELR is on, as Kafka does with ELR (KIP-966: the value must be the
// same for the controller and every leader, so that a replica joins the
// ELR exactly when the leaders' high watermark stops): it is set on a
// topic or as the cluster default.
func checkMinISRChange(im *metadata.Image, r metadata.ConfigResource, next map[string]string) error {
	if r.Type != metadata.ResourceBroker || r.Name == "" || !elrEnabled(im) {
		return nil
	}
	if next["min.insync.replicas"] != im.BrokerConfigs[r.Name]["min.insync.replicas"] && next["min.insync.replicas"] != "" {
		return fmt.Errorf("%w: min.insync.replicas cannot be set for one broker while %s is 1 (eligible leader replicas, KIP-966); set it as the cluster default or on the topic",
			kerr.InvalidConfig, metadata.FeatureELRVersion)
	}
	return nil
}

// removeFromELR takes broker id out of every ELR
// (handleBrokerUncleanShutdown): its data may be gone. LastKnownELR keeps
// it: the last known leader is a candidate of unclean election only.
func (a *active) removeFromELR(b *batch, id int32) {
	b.forEachPartition(func(t *metadata.Topic, p *metadata.Partition) {
		if !has(p.ELR, id) {
			return
		}
		b.add(record{Type: recPartitionChange, Name: t.Name, Part: &partChange{Index: p.Index, Leader: p.Leader, ISR: p.ISR,
			Recovering: p.Recovering, ELR: without(p.ELR, id), LastKnownELR: p.LastKnownELR}})
	})
}

// clearELR empties the ELR and LastKnownELR of every partition of topic
// (a min.insync.replicas change).
func clearELR(b *batch, topic string) {
	b.forEachPartition(func(t *metadata.Topic, p *metadata.Partition) {
		if t.Name != topic || (len(p.ELR) == 0 && len(p.LastKnownELR) == 0) {
			return
		}
		b.add(record{Type: recPartitionChange, Name: t.Name, Part: &partChange{Index: p.Index, Leader: p.Leader, ISR: p.ISR, Recovering: p.Recovering}})
	})
}
