package metadata

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
)

// Dynamic broker configs (KIP-226) and group configs (KIP-848) are stored
// in the image by resource, as Kafka's ConfigRecords with resourceType
// BROKER and GROUP: the whole set of a resource is replaced at once (one
// record per change here), validated by the active controller.

// Config resource types (Kafka's ConfigResource.Type ids).
const (
	ResourceTopic  int8 = 2
	ResourceBroker int8 = 4
	ResourceGroup  int8 = 32
)

// MaxResourceConfigs bounds the broker and group resources with stored
// configs, and MaxConfigsPerResource the configs of one.
const (
	MaxResourceConfigs    = 100000
	MaxConfigsPerResource = 1000
)

// ConfigResource names a BROKER resource (Name "" is the cluster default,
// else a broker id) or a GROUP resource (a group id).
type ConfigResource struct {
	Type int8   `json:"type"`
	Name string `json:"name"`
}

// String renders the resource as Kafka's ConfigResource does.
func (r ConfigResource) String() string {
	t := map[int8]string{ResourceBroker: "BROKER", ResourceGroup: "GROUP"}[r.Type]
	if t == "" {
		t = strconv.Itoa(int(r.Type))
	}
	return "ConfigResource(type=" + t + ", name='" + r.Name + "')"
}

// ResourceConfigAlterer is a Controller that stores dynamic broker and
// group configs. Local and the Raft controller are.
type ResourceConfigAlterer interface {
	// AlterResourceConfigs applies ops to the resource's stored configs
	// (with replace, legacy AlterConfigs: the SET ops are the whole new
	// set), checks the result (PlanResourceConfigs) and, unless
	// validateOnly, commits it.
	AlterResourceConfigs(ctx context.Context, r ConfigResource, ops []ConfigOp, replace, validateOnly bool) error
}

// ResourceConfigs returns the stored configs of a resource (nil if none).
// Callers must not modify them.
func (im *Image) ResourceConfigs(r ConfigResource) map[string]string {
	switch r.Type {
	case ResourceBroker:
		return im.BrokerConfigs[r.Name]
	case ResourceGroup:
		return im.GroupConfigs[r.Name]
	}
	return nil
}

// SetResourceConfigs replaces a resource's configs (none: removed). The
// image's maps are replaced, never changed in place, so clones share them.
func (im *Image) SetResourceConfigs(r ConfigResource, set map[string]string) {
	var cur map[string]map[string]string
	switch r.Type {
	case ResourceBroker:
		cur = im.BrokerConfigs
	case ResourceGroup:
		cur = im.GroupConfigs
	default:
		return
	}
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]map[string]string{}
	}
	if len(set) == 0 {
		delete(next, r.Name)
	} else {
		next[r.Name] = maps.Clone(set)
	}
	if len(next) == 0 {
		next = nil
	}
	switch r.Type {
	case ResourceBroker:
		im.BrokerConfigs = next
	case ResourceGroup:
		im.GroupConfigs = next
	}
}

// checkResourceName applies Kafka's ControllerConfigurationValidator
// rules to a resource's name: a broker is "" or a non-negative id, a
// group is named.
func checkResourceName(r ConfigResource) error {
	switch r.Type {
	case ResourceBroker:
		if r.Name == "" {
			return nil
		}
		id, err := strconv.ParseInt(r.Name, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: Unable to parse broker name as a base 10 number.", kerr.InvalidRequest)
		}
		if id < 0 {
			return fmt.Errorf("%w: Invalid negative broker ID.", kerr.InvalidRequest)
		}
	case ResourceGroup:
		if r.Name == "" {
			return fmt.Errorf("%w: Default group resources are not allowed.", kerr.InvalidRequest)
		}
	default:
		return fmt.Errorf("%w: Unknown resource type %d", kerr.InvalidRequest, r.Type)
	}
	return nil
}

// PlanResourceConfigs returns the resource's configs in im changed by ops
// (replace: the SET ops are the whole new set), checked: broker configs
// by config.CheckDynamicBrokerConfigs, group configs by
// config.CheckGroupConfigs against cfg's bounds. APPEND and SUBTRACT
// start from the stored value, else the setting's default, as Kafka's
// ConfigurationControlManager does.
func PlanResourceConfigs(im *Image, cfg *config.Broker, r ConfigResource, ops []ConfigOp, replace bool) (map[string]string, error) {
	if err := checkResourceName(r); err != nil {
		return nil, err
	}
	next := map[string]string{}
	if !replace {
		maps.Copy(next, im.ResourceConfigs(r))
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Name] {
			return nil, fmt.Errorf("%w: Error due to duplicate config keys", kerr.InvalidRequest)
		}
		seen[op.Name] = true
		switch op.Op {
		case 0:
			next[op.Name] = op.Value
		case 1:
			delete(next, op.Name)
		case 2, 3:
			d := resourceDef(r, op.Name)
			if d == nil || d.Type != config.TypeList {
				return nil, fmt.Errorf("%w: Can't %s to key %s because its type is not LIST.", kerr.InvalidConfig, map[int8]string{2: "APPEND", 3: "SUBTRACT"}[op.Op], op.Name)
			}
			cur, ok := next[op.Name]
			if !ok {
				cur = d.Default
			}
			next[op.Name] = applyListOp(cur, op)
		default:
			return nil, fmt.Errorf("%w: Unknown operations type %d", kerr.InvalidRequest, op.Op)
		}
	}
	if len(next) > MaxConfigsPerResource {
		return nil, fmt.Errorf("%w: at most %d configs per resource", kerr.PolicyViolation, MaxConfigsPerResource)
	}
	if len(next) > 0 && im.ResourceConfigs(r) == nil && len(im.BrokerConfigs)+len(im.GroupConfigs) >= MaxResourceConfigs {
		return nil, fmt.Errorf("%w: at most %d broker and group resources with configs", kerr.PolicyViolation, MaxResourceConfigs)
	}
	var err error
	if r.Type == ResourceBroker {
		err = config.CheckDynamicBrokerConfigs(next, r.Name != "")
	} else {
		err = config.CheckGroupConfigs(next, cfg)
		if err == nil {
			err = checkDLQGroupConfig(im, cfg, r.Name, im.ResourceConfigs(r), next)
		}
	}
	if err != nil {
		return nil, err
	}
	return next, nil
}

// resourceDef is the definition of a broker or group config, nil if none.
func resourceDef(r ConfigResource, name string) *config.Def {
	if r.Type == ResourceGroup {
		if d, ok := config.LookupGroupDef(name); ok {
			return &d.Def
		}
		return nil
	}
	if d, ok := config.BrokerDef(name); ok {
		return d
	}
	return nil
}

// AlterResourceConfigs implements ResourceConfigAlterer.
func (l *Local) AlterResourceConfigs(_ context.Context, r ConfigResource, ops []ConfigOp, replace, validateOnly bool) error {
	if _, err := PlanResourceConfigs(l.store.Image(), l.cfg, r, ops, replace); err != nil || validateOnly {
		return err
	}
	return l.store.Update(func(im *Image) error {
		next, err := PlanResourceConfigs(im, l.cfg, r, ops, replace)
		if err != nil {
			return err
		}
		im.SetResourceConfigs(r, next)
		return nil
	})
}
