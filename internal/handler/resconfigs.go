package handler

// BROKER and GROUP config resources, shared by DescribeConfigs,
// AlterConfigs and IncrementalAlterConfigs: dynamic broker configs
// (KIP-226, Kafka's DynamicBrokerConfig and ConfigHelper) and group
// configs (KIP-848, Kafka's GroupConfig).

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
)

// Resource types beyond topics and brokers (Kafka's ConfigResource.Type).
const resourceGroup = 32

// brokerSynonyms are the names a broker setting may be given under, in
// Kafka's order of precedence (DynamicBrokerConfig.brokerConfigSynonyms).
func brokerSynonyms(name string) []string {
	switch name {
	case "log.retention.ms", "log.retention.minutes", "log.retention.hours":
		return []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}
	case "log.roll.ms", "log.roll.hours":
		return []string{"log.roll.ms", "log.roll.hours"}
	}
	return []string{name}
}

// staticDefault is Kafka's default of a broker setting, if it has one.
func staticDefault(name string) (string, bool) {
	if v, ok := config.BrokerDefaults[name]; ok {
		return v, true
	}
	if d, ok := config.BrokerDef(name); ok && d.Default != "" {
		return d.Default, true
	}
	return "", false
}

// brokerSynonymList is the synonyms of a broker setting with their
// sources, highest precedence first (Kafka's ConfigHelper.configSynonyms):
// this broker's dynamic values (unless clusterOnly), the cluster
// default's, the static ones and Kafka's defaults, each over every
// synonym name, starting from the first entry named name. Sensitive
// values are nil.
func brokerSynonymList(cfg *config.Broker, name string, clusterOnly bool) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	cluster, own := cfg.Dynamic()
	sensitive := config.IsSensitive(name)
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	add := func(n, v string, src config.Source) {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name, s.Source = n, kmsg.ConfigSource(src)
		if !sensitive {
			vv := v
			s.Value = &vv
		}
		out = append(out, s)
	}
	names := brokerSynonyms(name)
	if !clusterOnly {
		for _, n := range names {
			if v, ok := own[n]; ok {
				add(n, v, config.SourceDynamicBroker)
			}
		}
	}
	for _, n := range names {
		if v, ok := cluster[n]; ok {
			add(n, v, config.SourceDynamicDefault)
		}
	}
	for _, n := range names {
		if v, ok := cfg.Props[n]; ok {
			add(n, v, config.SourceStaticBroker)
		}
	}
	for _, n := range names {
		if v, ok := staticDefault(n); ok {
			add(n, v, config.SourceDefault)
		}
	}
	for len(out) > 0 && out[0].Name != name {
		out = out[1:]
	}
	return out
}

// brokerConfigEntry describes one broker setting (Kafka's
// ConfigHelper.createBrokerConfigEntry): its value and source, read-only
// unless sluice lets it change at run time (config.DynamicMode). With
// clusterOnly (the cluster-default resource) the value is the cluster
// default's and this broker's own values are left out.
func brokerConfigEntry(cfg *config.Broker, name string, clusterOnly, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = name
	var val string
	src := config.SourceDefault
	if clusterOnly {
		cluster, _ := cfg.Dynamic()
		val, src = cluster[name], config.SourceDynamicDefault
	} else {
		val, src, _ = cfg.Lookup(name)
	}
	c.Value = &val
	if config.IsSensitive(name) {
		// Kafka never returns a password's value (isSensitive); nor
		// a key or a JAAS configuration, per-listener ones included.
		c.Value, c.IsSensitive = nil, true
	}
	c.Source = kmsg.ConfigSource(src)
	c.IsDefault = src == config.SourceDefault
	c.ReadOnly = config.DynamicMode(name) == config.ReadOnly
	if d, ok := config.BrokerDef(name); ok {
		c.ConfigType = kmsg.ConfigType(d.Type)
		if docs && d.Doc != "" {
			doc := d.Doc
			c.Documentation = &doc
		}
	}
	if synonyms {
		c.ConfigSynonyms = brokerSynonymList(cfg, name, clusterOnly)
	}
	return c
}

// describeBroker answers DescribeConfigs on a BROKER resource as Kafka's
// ConfigHelper does: the empty name is the cluster default (its dynamic
// configs only), this broker's id every setting, another id
// INVALID_REQUEST (a client asks each broker for its own).
func (h *Handlers) describeBroker(name string, names []string, synonyms, docs bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	cfg := h.b.Config()
	want := wanted(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	if name == "" {
		cluster, _ := cfg.Dynamic()
		for _, n := range sortedNames(cluster) {
			if want(n) {
				out = append(out, brokerConfigEntry(cfg, n, true, synonyms, docs))
			}
		}
		return out, nil
	}
	if id, err := strconv.ParseInt(name, 10, 32); err != nil || int32(id) != h.b.NodeID() {
		return nil, fmt.Errorf("%w: Unexpected broker id, expected %d or empty string, but received %s", kerr.InvalidRequest, h.b.NodeID(), name)
	}
	all := cfg.Names()
	for _, n := range names {
		// A setting asked for by name is described even when it has no
		// value (Kafka lists every setting it knows).
		if _, ok := config.BrokerDef(n); ok && !slices.Contains(all, n) {
			all = append(all, n)
		}
	}
	slices.Sort(all)
	for _, n := range slices.Compact(all) {
		if want(n) {
			out = append(out, brokerConfigEntry(cfg, n, false, synonyms, docs))
		}
	}
	return out, nil
}

// describeGroup answers DescribeConfigs on a GROUP resource (Kafka's
// ConfigHelper): every group config, GROUP_CONFIG when set on the group,
// else DEFAULT_CONFIG with the broker's default.
func (h *Handlers) describeGroup(group string, names []string, synonyms, docs bool) ([]kmsg.DescribeConfigsResponseResourceConfig, error) {
	if group == "" {
		return nil, fmt.Errorf("%w: Group name must not be empty", kerr.InvalidRequest)
	}
	cfg := h.b.Config()
	set := h.b.Image().ResourceConfigs(metadata.ConfigResource{Type: metadata.ResourceGroup, Name: group})
	want := wanted(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range config.GroupDefs {
		if !want(d.Name) {
			continue
		}
		v, src := cfg.GroupConfig(set, d.Name)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = d.Name
		val := v
		c.Value = &val
		c.Source = kmsg.ConfigSource(src)
		c.IsDefault = src == config.SourceDefault
		c.ConfigType = kmsg.ConfigType(d.Type)
		if docs && d.Doc != "" {
			doc := d.Doc
			c.Documentation = &doc
		}
		if synonyms {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name, s.Value, s.Source = d.Name, &val, c.Source
			c.ConfigSynonyms = append(c.ConfigSynonyms, s)
		}
		out = append(out, c)
	}
	return out, nil
}

// alterResource is AlterConfigs (replace) or IncrementalAlterConfigs on a
// BROKER or GROUP resource. A broker resource must be the cluster default
// or this broker (Kafka's ConfigAdminManager.preprocess: a client sends a
// broker's change to that broker).
func (h *Handlers) alterResource(typ int8, name string, ops []broker.ConfigOp, replace, validateOnly bool) error {
	if typ == resourceBroker && name != "" {
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: Node id must be an integer, but it is: %s", kerr.InvalidRequest, name)
		}
		if int32(id) != h.b.NodeID() {
			return fmt.Errorf("%w: Unexpected broker id, expected %d, but received %s", kerr.InvalidRequest, h.b.NodeID(), name)
		}
	}
	return h.b.AlterResourceConfigs(metadata.ConfigResource{Type: typ, Name: name}, ops, replace, validateOnly)
}

// nullValues is Kafka's check that only DELETE may come without a value.
func nullValues(names []string) error {
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%w: Null value not supported for : %s", kerr.InvalidRequest, strings.Join(names, ", "))
}

// duplicateResources marks the resources named more than once (Kafka:
// "Each resource must appear at most once.").
func duplicateResources(n int, key func(int) [2]string) []bool {
	seen := map[[2]string]int{}
	dup := make([]bool, n)
	for i := 0; i < n; i++ {
		k := key(i)
		if j, ok := seen[k]; ok {
			dup[i], dup[j] = true, true
		}
		seen[k] = i
	}
	return dup
}

var errDuplicateResource = fmt.Errorf("%w: Each resource must appear at most once.", kerr.InvalidRequest)

func sortedNames(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
