package handler

// DescribeConfigs, versions 0-4.
//
// Topic resources list every topic config Kafka has, with its effective
// value and source (DYNAMIC_TOPIC_CONFIG when set on the topic,
// STATIC_BROKER_CONFIG when server.properties sets the broker default,
// DEFAULT_CONFIG otherwise), synonyms (v1+, IncludeSynonyms) and types
// (v3+). Broker resources (Kafka's ConfigHelper): this broker's id lists
// every broker setting sluice knows with its effective value and source
// (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
// STATIC_BROKER_CONFIG, DEFAULT_CONFIG; read-only unless it may change at
// run time), the empty name the cluster's dynamic defaults only, another
// broker's id INVALID_REQUEST. Group resources (KIP-848) list the group
// configs (GROUP_CONFIG or DEFAULT_CONFIG). Admin UIs (kafka-ui, AKHQ)
// rely on the full default list.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// Resource types (Kafka's ConfigResource.Type; resourceGroup in
// resconfigs.go).
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
			var err error
			sr.Configs, err = h.describeBroker(rr.ResourceName, rr.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
			sr.ErrorCode, sr.ErrorMessage = code(err), message(err)
		case resourceGroup:
			// DESCRIBE_CONFIGS on the group (ConfigHelper.authorize).
			if !h.allowedGroup(r, rr.ResourceName, acl.OpDescribeConfigs) {
				sr.ErrorCode = kerr.GroupAuthorizationFailed.Code
				break
			}
			var err error
			sr.Configs, err = h.describeGroup(rr.ResourceName, rr.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
			sr.ErrorCode, sr.ErrorMessage = code(err), message(err)
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
			// Kafka's order: the topic's own value, the broker
			// setting's (dynamic, static, default), the topic
			// config's default.
			if src == config.SourceTopic {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = d.Name, &val, kmsg.ConfigSource(config.SourceTopic)
				c.ConfigSynonyms = append(c.ConfigSynonyms, s)
			}
			if d.BrokerName != "" {
				for _, s := range brokerSynonymList(b.Config(), d.BrokerName, false) {
					if s.Source != kmsg.ConfigSourceDefaultConfig {
						c.ConfigSynonyms = append(c.ConfigSynonyms, s)
					}
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
