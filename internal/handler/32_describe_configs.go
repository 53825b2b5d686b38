package handler

// DescribeConfigs, versions 0-4.
//
// Topic resources list every topic config Kafka has, with its effective
// value and source (DYNAMIC_TOPIC_CONFIG when set on the topic,
// STATIC_BROKER_CONFIG when server.properties sets the broker default,
// DEFAULT_CONFIG otherwise), synonyms (v1+, IncludeSynonyms) and types
// (v3+). Broker resources list the broker settings sluice reads. Admin UIs
// (kafka-ui, AKHQ) rely on the full default list.

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// Resource types.
const (
	resourceTopic  = 2
	resourceBroker = 4
)

func (h *Handlers) describeConfigs(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := h.b.Image()
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		// DESCRIBE_CONFIGS on the topic or the cluster
		// (KafkaApis.handleDescribeConfigsRequest).
		switch rr.ResourceType {
		case resourceTopic:
			if !h.allowedTopic(r, rr.ResourceName, acl.OpDescribeConfigs) {
				sr.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			t := img.Topics[rr.ResourceName]
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			sr.Configs = describeTopicConfigsD(h.b, t, rr.ConfigNames, req.IncludeSynonyms)
		case resourceBroker:
			if !h.allowedCluster(r, acl.OpDescribeConfigs) {
				sr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				break
			}
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(h.b.NodeID())) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				break
			}
			sr.Configs = h.describeBrokerConfigs(rr.ConfigNames)
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return protocol.Reply{Resp: resp}
}

func wanted(names []string) func(string) bool {
	if names == nil {
		return func(string) bool { return true }
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return func(n string) bool { return set[n] }
}

// describeTopicConfigsD describes a topic's configs for DescribeConfigs.
func describeTopicConfigsD(b *broker.Broker, t *metadata.Topic, names []string, synonyms bool) []kmsg.DescribeConfigsResponseResourceConfig {
	tc := b.TopicConfig(t)
	want := wanted(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range config.TopicDefs {
		if !want(d.Name) {
			continue
		}
		v, src := tc.Get(d.Name)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = d.Name
		val := v
		c.Value = &val
		c.Source = kmsg.ConfigSource(src)
		c.IsDefault = src == config.SourceDefault
		c.ConfigType = kmsg.ConfigType(d.Type)
		if d.Doc != "" {
			doc := d.Doc
			c.Documentation = &doc
		}
		if synonyms {
			if src == config.SourceTopic {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = d.Name, &val, kmsg.ConfigSource(config.SourceTopic)
				c.ConfigSynonyms = append(c.ConfigSynonyms, s)
			}
			if d.BrokerName != "" {
				if bv, ok := b.Config().TopicDefault(d.BrokerName); ok {
					s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					bvv := bv
					s.Name, s.Value, s.Source = d.BrokerName, &bvv, kmsg.ConfigSource(config.SourceStaticBroker)
					c.ConfigSynonyms = append(c.ConfigSynonyms, s)
				}
			}
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			def := d.Default
			s.Name, s.Value, s.Source = d.Name, &def, kmsg.ConfigSource(config.SourceDefault)
			c.ConfigSynonyms = append(c.ConfigSynonyms, s)
		}
		out = append(out, c)
	}
	return out
}

// describeTopicConfigs renders a topic's configs for CreateTopics v5+.
func describeTopicConfigs(b *broker.Broker, t *metadata.Topic, names []string, _ bool) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, d := range describeTopicConfigsD(b, t, names, false) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Value, c.ReadOnly, c.Source, c.IsSensitive = d.Name, d.Value, d.ReadOnly, int8(d.Source), d.IsSensitive
		out = append(out, c)
	}
	return out
}

func (h *Handlers) describeBrokerConfigs(names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	want := wanted(names)
	cfg := h.b.Config()
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, n := range cfg.Names() {
		if !want(n) {
			continue
		}
		v, _ := cfg.Get(n)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = n
		val := v
		c.Value = &val
		if config.IsSensitive(n) {
			// Kafka never returns a password's value (isSensitive); nor
			// a key or a JAAS configuration, per-listener ones included.
			c.Value, c.IsSensitive = nil, true
		}
		c.ReadOnly = true
		if _, set := cfg.Props[n]; set {
			c.Source = kmsg.ConfigSource(config.SourceStaticBroker)
		} else {
			c.Source = kmsg.ConfigSource(config.SourceDefault)
			c.IsDefault = true
		}
		out = append(out, c)
	}
	return out
}
