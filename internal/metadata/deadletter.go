package metadata

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
)

// ShareVersionDLQ is the share.version that serves share-group dead-letter
// queues (KIP-1191): below it errors.deadletterqueue.topic.name cannot be
// set and the share partitions copy nothing.
const ShareVersionDLQ = 2

// DLQTopicPrefix returns errors.deadletterqueue.topic.name.prefix: the
// cluster-wide dynamic value in im, else cfg's.
func DLQTopicPrefix(im *Image, cfg *config.Broker) string {
	if v, ok := im.BrokerConfigs[""][config.DLQTopicPrefixConfig]; ok {
		return strings.TrimSpace(v)
	}
	v, _, _ := cfg.Lookup(config.DLQTopicPrefixConfig)
	return strings.TrimSpace(v)
}

// CheckDLQTopic checks a share group's dead-letter topic name against the
// rules of Kafka's ShareGroupDLQValidator.validateDlqTopicConfig, in its
// order, with its messages: not an internal (__) name, an existing topic
// must have errors.deadletterqueue.group.enable=true, and the name starts
// with prefix unless that is empty. A name that is not a legal topic name
// is refused first. Every error is INVALID_CONFIG.
func CheckDLQTopic(im *Image, group, topic, prefix string) error {
	bad := func(format string, args ...any) error {
		return &config.DynamicError{Code: kerr.InvalidConfig, Msg: fmt.Sprintf(format, args...)}
	}
	if err := ValidateTopicName(topic); err != nil {
		return bad("Configured DLQ topic name in share group: %s is not a valid topic name, topic: %s.", group, topic)
	}
	if strings.HasPrefix(topic, "__") {
		return bad("Configured DLQ topic name in share group: %s cannot start with __, topic: %s.", group, topic)
	}
	if t := im.Topics[topic]; t != nil && !strings.EqualFold(strings.TrimSpace(t.Configs[config.DLQGroupEnableConfig]), "true") {
		return bad("DLQ is not enabled on configured DLQ topic for share group: %s, topic: %s", group, topic)
	}
	if prefix != "" && !strings.HasPrefix(topic, prefix) {
		return bad("Configured DLQ topic name does not comply with the DLQ topic prefix in share group: %s, topic: %s, prefix: %s", group, topic, prefix)
	}
	return nil
}

// checkDLQGroupConfig checks a change of group's
// errors.deadletterqueue.topic.name (next is the group's new set, old its
// stored one): a new non-empty name needs share.version 2 (KIP-1191) and
// must pass CheckDLQTopic. An unchanged name is not checked again, so that
// a later change of the prefix or of the topic does not refuse the group's
// other configs; the share partitions check it again on every write.
func checkDLQGroupConfig(im *Image, cfg *config.Broker, group string, old, next map[string]string) error {
	topic := strings.TrimSpace(next[config.DLQTopicNameConfig])
	if topic == "" || topic == strings.TrimSpace(old[config.DLQTopicNameConfig]) {
		return nil
	}
	if im.ShareVersion() < ShareVersionDLQ {
		return &config.DynamicError{Code: kerr.InvalidConfig, Msg: fmt.Sprintf("%s requires the share.version feature at %d or above (KIP-1191); it is %d.",
			config.DLQTopicNameConfig, ShareVersionDLQ, im.ShareVersion())}
	}
	return CheckDLQTopic(im, group, topic, DLQTopicPrefix(im, cfg))
}
