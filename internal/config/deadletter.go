package config

// The share-group dead-letter queue's settings (KIP-1191, Kafka's
// GroupCoordinatorConfig.ERRORS_DEADLETTERQUEUE_* and
// GroupConfig.ERRORS_DEADLETTERQUEUE_*): two cluster-wide dynamic broker
// settings, two group configs (GroupDefs) and one topic config
// (TopicDefs).

// Names of the dead-letter settings.
const (
	// DLQTopicNameConfig is the group config naming a share group's
	// dead-letter topic; empty (the default) sends nothing.
	DLQTopicNameConfig = "errors.deadletterqueue.topic.name"
	// DLQCopyRecordConfig is the group config that copies the key and
	// value of a dead-lettered record, not only the context headers.
	DLQCopyRecordConfig = "errors.deadletterqueue.copy.record.enable"
	// DLQTopicPrefixConfig is the broker setting every dead-letter topic
	// name must start with ("" for no rule).
	DLQTopicPrefixConfig = "errors.deadletterqueue.topic.name.prefix"
	// DLQAutoCreateConfig is the broker setting that creates a missing
	// dead-letter topic on the first write.
	DLQAutoCreateConfig = "errors.deadletterqueue.auto.create.topics.enable"
	// DLQGroupEnableConfig is the topic config that lets groups use the
	// topic as their dead-letter topic.
	DLQGroupEnableConfig = "errors.deadletterqueue.group.enable"
)

// deadLetterDefs are the dead-letter queue's broker settings.
var deadLetterDefs = []Def{
	{Name: DLQAutoCreateConfig, Type: TypeBoolean, Default: "false", Doc: "Share-group dead-letter queue (KIP-1191): a group's dead-letter topic that does not exist is created on its first write (default partitions and replication factor, with errors.deadletterqueue.group.enable=true); false: the record is archived without a copy. Dynamic, cluster-wide."},
	{Name: DLQTopicPrefixConfig, Type: TypeString, Default: "dlq.", Doc: "Share-group dead-letter queue (KIP-1191): the prefix every errors.deadletterqueue.topic.name must start with (empty: any name but an internal __ one). Dynamic, cluster-wide."},
}
