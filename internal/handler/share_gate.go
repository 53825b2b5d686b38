package handler

import (
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// shareAPIKeys are the share-group APIs (KIP-932): each is advertised in
// ApiVersions only while the cluster's share.version is at least 1, as
// Kafka's ApiKeys gate them by that feature (ShareGroupHeartbeat 76,
// ShareGroupDescribe 77, ShareFetch 78, ShareAcknowledge 79 and the
// share-group offsets admin APIs 90..92;
// the share coordinator's inter-broker RPCs 83..87 stay advertised).
var shareAPIKeys = []int16{76, 77, 78, 79, 90, 91, 92}

// shareOff reports whether share groups are off: the cluster's
// share.version is 0.
func (h *Handlers) shareOff() bool { return h.b.Image().ShareVersion() < 1 }

// gateShareAPIs hides the registered share APIs while share.version is 0
// and advertises the share.version feature, finalized in the metadata
// (57_update_features.go).
func (h *Handlers) gateShareAPIs(reg *protocol.Registry) {
	for _, k := range shareAPIKeys {
		if api, ok := reg.Lookup(k); ok {
			api.Hidden = h.shareOff
			reg.Register(api)
		}
	}
	sv := metadata.SupportedFeatures()[metadata.FeatureShareVersion]
	reg.SetFeature(protocol.Feature{Name: metadata.FeatureShareVersion, Min: sv.Min, Max: sv.Max, Level: func() (int16, int64) {
		im := h.b.Image()
		return im.ShareVersion(), im.Offset
	}})
}
