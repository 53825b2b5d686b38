package controller

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/metadata"
)

// UpdateFeatures (KIP-584, Kafka's FeatureControlManager.updateFeatures):
// a feature's finalized level moves only to a level this controller knows
// and every registered broker supports (a broker registered by a binary
// that predates features supports level 0 only), so that no running
// binary meets a record or behaviour it does not know. Downgrades need
// the downgrade flag, and kraft.version cannot go down (as in Kafka). All
// updates of a request are applied together or not at all.

const opUpdateFeatures = "UpdateFeatures"

func init() {
	handlers[opUpdateFeatures] = (*active).updateFeatures
}

type updateFeaturesReq struct {
	Updates      []metadata.FeatureUpdate `json:"updates"`
	ValidateOnly bool                     `json:"validateOnly,omitempty"`
}

type updateFeaturesResp struct {
	// Errors has an entry for every refused update: a Kafka error code
	// and a message.
	Errors map[string]featureErr `json:"errors,omitempty"`
}

type featureErr struct {
	Code int16  `json:"code"`
	Msg  string `json:"msg"`
}

var _ metadata.FeatureController = (*Node)(nil)

// UpdateFeatures implements metadata.FeatureController.
func (n *Node) UpdateFeatures(ctx context.Context, updates []metadata.FeatureUpdate, validateOnly bool) (map[string]error, error) {
	var resp updateFeaturesResp
	if err := n.write(ctx, opUpdateFeatures, updateFeaturesReq{Updates: updates, ValidateOnly: validateOnly}, &resp); err != nil {
		return nil, err
	}
	out := map[string]error{}
	for _, u := range updates {
		out[u.Name] = nil
	}
	for name, e := range resp.Errors {
		out[name] = codeErr(e.Code, e.Msg)
	}
	return out, nil
}

// checkFeature returns why update u cannot be applied to im, nil if it can.
func checkFeature(im *metadata.Image, u metadata.FeatureUpdate) error {
	known, ok := metadata.SupportedFeatures()[u.Name]
	switch {
	case !ok:
		return fmt.Errorf("%w: unknown feature %q", kerr.InvalidUpdateVersion, u.Name)
	case u.Level < 0 || u.Level > known.Max:
		return fmt.Errorf("%w: %s level %d is outside this controller's range %d-%d", kerr.InvalidUpdateVersion, u.Name, u.Level, known.Min, known.Max)
	}
	cur := im.FeatureLevel(u.Name)
	if u.Level < cur {
		if !u.Downgrade || u.Name == metadata.FeatureKRaftVersion {
			return fmt.Errorf("%w: %s cannot go down from %d to %d", kerr.InvalidUpdateVersion, u.Name, cur, u.Level)
		}
	}
	var behind []int32
	for _, id := range im.BrokerIDs() {
		r, ok := im.Brokers[id].Features[u.Name]
		if !ok {
			r = metadata.FeatureRange{} // a binary without features: level 0
		}
		if u.Level < r.Min || u.Level > r.Max {
			behind = append(behind, id)
		}
	}
	if len(behind) > 0 {
		sort.Slice(behind, func(i, j int) bool { return behind[i] < behind[j] })
		return fmt.Errorf("%w: brokers %v do not support %s level %d (upgrade them first)", kerr.InvalidUpdateVersion, behind, u.Name, u.Level)
	}
	return nil
}

// updateFeatures is UpdateFeatures on the active controller.
func (a *active) updateFeatures(ctx context.Context, body []byte) (any, int64, error) {
	var in updateFeaturesReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	var resp updateFeaturesResp
	off, err := a.decide(ctx, func(im *metadata.Image, b *batch) error {
		resp.Errors = nil
		seen := map[string]bool{}
		for _, u := range in.Updates {
			err := checkFeature(im, u)
			if seen[u.Name] {
				err = fmt.Errorf("%w: %s named twice", kerr.InvalidRequest, u.Name)
			}
			seen[u.Name] = true
			if err != nil {
				if resp.Errors == nil {
					resp.Errors = map[string]featureErr{}
				}
				r := errResponse(err)
				resp.Errors[u.Name] = featureErr{Code: r.Code, Msg: r.Msg}
			}
		}
		if len(resp.Errors) > 0 || in.ValidateOnly {
			return nil
		}
		for _, u := range in.Updates {
			if im.FeatureLevel(u.Name) != u.Level {
				a.n.log.Info("feature level finalized", "feature", u.Name, "from", im.FeatureLevel(u.Name), "to", u.Level)
				b.add(record{Type: recFeatureLevel, Feature: &featureLevel{Name: u.Name, Level: u.Level}})
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return resp, off, nil
}
