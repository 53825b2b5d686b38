package broker

import (
	"context"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// GroupConfig returns the effective value of group config name (Kafka's
// GroupConfig: consumer.*, share.*) for group: the group's own, set with
// IncrementalAlterConfigs on its GROUP resource and validated against
// the broker's bounds there, else the broker setting that defaults it.
// set reports whether the group has its own value. Share partitions read
// share.auto.offset.reset, share.record.lock.duration.ms,
// share.delivery.count.limit and share.isolation.level through it.
func (b *Broker) GroupConfig(group, name string) (value string, set bool) {
	v, src := b.cfg.GroupConfig(b.Image().GroupConfigs[group], name)
	return v, src == config.SourceGroup
}

// SyncMetadata returns once this node's metadata image holds every change
// the active controller had committed when asked (metadata.Syncer); at
// once with a controller that applies at commit.
func (b *Broker) SyncMetadata(ctx context.Context) error {
	if s, ok := b.ctrl.(metadata.Syncer); ok {
		return s.SyncMetadata(ctx)
	}
	return nil
}
