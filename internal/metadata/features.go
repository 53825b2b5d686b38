package metadata

import "context"

// Features (KIP-584, Kafka's FeatureControlManager): a feature has levels;
// every broker registers the range it supports, and the cluster's
// finalized level (Image.Features) moves only when every registered
// broker supports the new one, through UpdateFeatures. A new cluster
// starts at the highest levels; a cluster upgraded from binaries that
// knew no feature starts at 0 and is finalized once all its nodes run a
// binary that supports more (a rolling upgrade, docs/operations.md).

// FeatureKRaftVersion is Kafka's kraft.version: 0 a static quorum
// (--voters only), 1 dynamic voters (KIP-853: AddRaftVoter,
// RemoveRaftVoter).
const FeatureKRaftVersion = "kraft.version"

// FeatureELRVersion is Kafka's eligible.leader.replicas.version (KIP-966):
// 1 keeps eligible leader replicas (Partition.ELR) and elects from them
// when the ISR is empty; 0 keeps the last ISR member in the ISR instead.
const FeatureELRVersion = "eligible.leader.replicas.version"

// FeatureGroupVersion is Kafka's group.version (KIP-848): 1 serves the
// consumer group protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe).
const FeatureGroupVersion = "group.version"

// FeatureShareVersion is Kafka's share.version (KIP-932): 1 serves share
// groups (ShareGroupHeartbeat, ShareGroupDescribe and the other share
// APIs); 0 does not; 2 adds their dead-letter queues (KIP-1191,
// ShareVersionDLQ).
const FeatureShareVersion = "share.version"

// FeatureRange is the levels a broker supports.
type FeatureRange struct {
	Min int16 `json:"min"`
	Max int16 `json:"max"`
}

// SupportedFeatures are the feature levels this binary supports.
func SupportedFeatures() map[string]FeatureRange {
	return map[string]FeatureRange{FeatureKRaftVersion: {Min: 0, Max: 1}, FeatureELRVersion: {Min: 0, Max: 1}, FeatureGroupVersion: {Min: 0, Max: 1}, FeatureShareVersion: {Min: 0, Max: 2}}
}

// FeatureLevel returns the cluster's finalized level of name (0 if none).
func (im *Image) FeatureLevel(name string) int16 { return im.Features[name] }

// GroupVersion is the cluster's group.version: the finalized level, or
// the highest supported one for a store that finalizes no feature (the
// single-node Local store, where every level is in effect from the
// start).
func (im *Image) GroupVersion() int16 {
	if im.Features == nil {
		return SupportedFeatures()[FeatureGroupVersion].Max
	}
	return im.Features[FeatureGroupVersion]
}

// ShareVersion is the cluster's share.version: the finalized level, or
// the highest supported one for a store that finalizes no feature (as
// GroupVersion).
func (im *Image) ShareVersion() int16 {
	if im.Features == nil {
		return SupportedFeatures()[FeatureShareVersion].Max
	}
	return im.Features[FeatureShareVersion]
}

// FeatureUpdate asks for feature Name at Level (UpdateFeatures).
type FeatureUpdate struct {
	Name  string `json:"name"`
	Level int16  `json:"level"`
	// Downgrade allows a lower level (Kafka's upgradeType SAFE/UNSAFE
	// downgrade); kraft.version cannot go down.
	Downgrade bool `json:"downgrade,omitempty"`
}

// FeatureController is a Controller that finalizes feature levels
// (UpdateFeatures). The Raft controller is one; the single-node Local
// store has every level finalized at its highest from the start.
type FeatureController interface {
	// UpdateFeatures checks and (unless validateOnly) applies the
	// updates, all or none; the error of each update is returned by
	// name (nil: accepted).
	UpdateFeatures(ctx context.Context, updates []FeatureUpdate, validateOnly bool) (map[string]error, error)
}
