// Package config defines sluice's broker and topic settings by their Apache
// Kafka names, with Kafka's defaults, and parses server.properties files.
package config

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Type is a config value's type, as DescribeConfigs v3+ reports it.
type Type int8

// Config types (values of DescribeConfigsResponse ConfigType).
const (
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypeClass    Type = 8
	TypePassword Type = 9
)

// String is the type's name in Kafka's ConfigDef.Type.
func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "boolean"
	case TypeString:
		return "string"
	case TypeInt:
		return "int"
	case TypeShort:
		return "short"
	case TypeLong:
		return "long"
	case TypeDouble:
		return "double"
	case TypeList:
		return "list"
	case TypeClass:
		return "class"
	case TypePassword:
		return "password"
	}
	return "unknown"
}

// Def defines one topic or broker config (Kafka's ConfigDef.ConfigKey).
type Def struct {
	// Name is the config's Kafka name.
	Name string
	// Type is its Kafka type; Validate checks values against it.
	Type Type
	// Default is Kafka's default value ("" for none/null), except where
	// Doc says sluice's differs.
	Default string
	// BrokerName is the broker-level setting that provides this topic
	// config's default (Kafka's synonym), e.g. log.retention.ms.
	BrokerName string
	// Min and Max bound numeric values (inclusive) when Max > Min.
	Min, Max float64
	// Enum lists the allowed values of a string setting, or of each
	// element of a list setting, if restricted.
	Enum []string
	// Check, if set, is a further check of the value's form (listeners,
	// voters); its error says what is expected.
	Check func(string) error
	// Form describes the values Check accepts, for the reference.
	Form string
	// Status is what sluice does with the setting: StatusImplemented (the
	// zero value), StatusIgnored or StatusRefused.
	Status Status
	// Refuse, if set, returns why sluice refuses a value at start ("" to
	// accept it): a value asking for something sluice does not implement
	// that would change cluster membership, durability, security or where
	// data lives. Validate calls it after the type and form checks.
	Refuse func(v string) string
	// Refuses describes the values Refuse refuses, for the reference.
	Refuses string
	// Synonym is, for a broker setting that defaults a topic config, the
	// topic config's name.
	Synonym string
	// Doc says what the setting does in sluice.
	Doc string
}

const maxLong = "9223372036854775807"

// TopicDefs is every topic config Kafka 3.x describes, with its default.
// DescribeConfigs returns all of them, so admin UIs that expect Kafka's full
// list work.
var TopicDefs = []Def{
	{Name: "cleanup.policy", Type: TypeList, Default: "delete", BrokerName: "log.cleanup.policy", Enum: []string{"delete", "compact"}, Doc: "delete: segments expire by retention.ms and retention.bytes; compact: the log cleaner keeps the latest record of each key (docs/compaction.md); compact,delete: both."},
	{Name: "compression.type", Type: TypeString, Default: "producer", BrokerName: "compression.type", Enum: []string{"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}, Doc: "Codec batches are stored with: the leader rebuilds a batch in another codec; producer keeps the producer's."},
	{Name: "delete.retention.ms", Type: TypeLong, Default: "86400000", BrokerName: "log.cleaner.delete.retention.ms", Min: 0, Max: math.MaxInt64},
	{Name: DLQGroupEnableConfig, Type: TypeBoolean, Default: "false", Doc: "Whether share groups may use this topic as their dead-letter topic (errors.deadletterqueue.topic.name, KIP-1191)."},
	{Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", BrokerName: "log.segment.delete.delay.ms", Min: 0, Max: math.MaxInt64},
	{Name: "flush.messages", Type: TypeLong, Default: maxLong, BrokerName: "log.flush.interval.messages", Min: 1, Max: math.MaxInt64, Status: StatusIgnored},
	{Name: "flush.ms", Type: TypeLong, Default: maxLong, BrokerName: "log.flush.interval.ms", Min: 0, Max: math.MaxInt64, Status: StatusIgnored},
	{Name: "follower.replication.throttled.replicas", Type: TypeList, Default: "", Check: checkThrottledReplicas, Form: "partition:broker,... or *", Doc: "KIP-73: the replicas throttled by follower.replication.throttled.rate (on the follower) while out of the ISR: partition:broker pairs, or * for every replica."},
	{Name: "index.interval.bytes", Type: TypeInt, Default: "4096", BrokerName: "log.index.interval.bytes", Min: 0, Max: math.MaxInt32},
	{Name: "leader.replication.throttled.replicas", Type: TypeList, Default: "", Check: checkThrottledReplicas, Form: "partition:broker,... or *", Doc: "KIP-73: the replicas throttled by leader.replication.throttled.rate (on the leader) while out of the ISR: partition:broker pairs, or * for every replica."},
	{Name: "local.retention.bytes", Type: TypeLong, Default: "-2", BrokerName: "log.local.retention.bytes", Min: -2, Max: math.MaxInt64, Doc: "With remote.storage.enable: the local segments are deleted, once copied to the remote log, while the local log is larger than this; -2 follows retention.bytes (KIP-405, docs/tiered-storage.md)."},
	{Name: "local.retention.ms", Type: TypeLong, Default: "-2", BrokerName: "log.local.retention.ms", Min: -2, Max: math.MaxInt64, Doc: "With remote.storage.enable: a local segment is deleted, once copied to the remote log, when its newest record is older than this; -2 follows retention.ms (KIP-405, docs/tiered-storage.md)."},
	{Name: "max.compaction.lag.ms", Type: TypeLong, Default: maxLong, BrokerName: "log.cleaner.max.compaction.lag.ms", Min: 1, Max: math.MaxInt64},
	{Name: "max.message.bytes", Type: TypeInt, Default: "1048588", BrokerName: "message.max.bytes", Min: 0, Max: math.MaxInt32, Doc: "Largest record batch accepted (MESSAGE_TOO_LARGE above it)."},
	{Name: "message.downconversion.enable", Type: TypeBoolean, Default: "true", BrokerName: "log.message.downconversion.enable", Status: StatusIgnored},
	{Name: "message.format.version", Type: TypeString, Default: "3.0-IV1", BrokerName: "log.message.format.version", Status: StatusIgnored},
	// KIP-937 (Kafka 3.6). The after default is Kafka 4.0's (KIP-1030,
	// KAFKA-16368: 3600000, one hour; it was Long.MAX_VALUE in 3.6-3.9);
	// before stays Long.MAX_VALUE. Applied to CreateTime topics only.
	{Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", BrokerName: "log.message.timestamp.after.max.ms", Min: 0, Max: math.MaxInt64, Doc: "Records timestamped further in the future than this get INVALID_TIMESTAMP (CreateTime topics)."},
	{Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: maxLong, BrokerName: "log.message.timestamp.before.max.ms", Min: 0, Max: math.MaxInt64, Doc: "Records timestamped further in the past than this get INVALID_TIMESTAMP (CreateTime topics)."},
	// Deprecated by KIP-937 and removed in Kafka 4.0 (KAFKA-17997); kept for
	// 3.x clients. When set, it bounds whichever of before/after.max.ms is
	// not set (Kafka 3.6-3.9's LogConfig rule).
	{Name: "message.timestamp.difference.max.ms", Type: TypeLong, Default: maxLong, BrokerName: "log.message.timestamp.difference.max.ms", Min: 0, Max: math.MaxInt64},
	{Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime", BrokerName: "log.message.timestamp.type", Enum: []string{"CreateTime", "LogAppendTime"}, Doc: "LogAppendTime: the leader stamps each batch with its clock (timestamp type bit and max timestamp)."},
	{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5", BrokerName: "log.cleaner.min.cleanable.ratio", Min: 0, Max: 1},
	{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", BrokerName: "log.cleaner.min.compaction.lag.ms", Min: 0, Max: math.MaxInt64},
	{Name: "min.insync.replicas", Type: TypeInt, Default: "1", BrokerName: "min.insync.replicas", Min: 1, Max: math.MaxInt32},
	{Name: "preallocate", Type: TypeBoolean, Default: "false", BrokerName: "log.preallocate", Status: StatusIgnored},
	{Name: "remote.log.copy.disable", Type: TypeBoolean, Default: "false", Doc: "KIP-950: with remote.storage.enable, the leader stops copying segments to the remote log; the remote log stays readable and still expires by retention.*, and the local log follows retention.* instead of local.retention.*, un-copied segments included (docs/tiered-storage.md)."},
	{Name: "remote.storage.enable", Type: TypeBoolean, Default: "false", Doc: "Tiered storage (KIP-405): the partition leader copies rolled segments to the object store and local.retention.* then bound the local log, while retention.* apply to the whole log. Refused on compacted topics; once on, it cannot be turned off (docs/tiered-storage.md)."},
	{Name: "retention.bytes", Type: TypeLong, Default: "-1", BrokerName: "log.retention.bytes", Min: -1, Max: math.MaxInt64},
	{Name: "retention.ms", Type: TypeLong, Default: "604800000", BrokerName: "log.retention.ms", Min: -1, Max: math.MaxInt64},
	{Name: "segment.bytes", Type: TypeInt, Default: "1073741824", BrokerName: "log.segment.bytes", Min: 14, Max: math.MaxInt32},
	{Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", BrokerName: "log.index.size.max.bytes", Min: 4, Max: math.MaxInt32},
	{Name: "segment.jitter.ms", Type: TypeLong, Default: "0", BrokerName: "log.roll.jitter.ms", Min: 0, Max: math.MaxInt64, Status: StatusIgnored},
	{Name: "segment.ms", Type: TypeLong, Default: "604800000", BrokerName: "log.roll.ms", Min: 1, Max: math.MaxInt64},
	{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false", BrokerName: "unclean.leader.election.enable"},
}

var topicDefByName = func() map[string]*Def {
	m := make(map[string]*Def, len(TopicDefs))
	for i := range TopicDefs {
		m[TopicDefs[i].Name] = &TopicDefs[i]
	}
	return m
}()

// LookupTopicDef returns the definition of a topic config.
func LookupTopicDef(name string) (*Def, bool) {
	d, ok := topicDefByName[name]
	return d, ok
}

// Validate checks value against the definition: type, range, enum and
// form, as Kafka's ConfigDef parses it (numbers and list elements are
// trimmed, booleans are case-insensitive). The error names the config, the
// value and what is expected, e.g.
// `invalid value "abc" for log.retention.ms: expected a long`.
func (d *Def) Validate(value string) error {
	bad := func(format string, args ...any) error {
		if d.Type == TypePassword {
			// A secret is never echoed.
			return fmt.Errorf("invalid value [hidden] for %s: %s", d.Name, fmt.Sprintf(format, args...))
		}
		return fmt.Errorf("invalid value %q for %s: %s", value, d.Name, fmt.Sprintf(format, args...))
	}
	v := strings.TrimSpace(value)
	switch d.Type {
	case TypeBoolean:
		if !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
			return bad("expected a boolean (true or false)")
		}
	case TypeInt, TypeLong, TypeShort:
		bits := map[Type]int{TypeShort: 16, TypeInt: 32, TypeLong: 64}[d.Type]
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil {
			return bad("expected %s", d.Type.article())
		}
		if d.Max > d.Min && (float64(n) < d.Min || float64(n) > d.Max) {
			return bad("expected %s %s", d.Type.article(), d.RangeString())
		}
	case TypeDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) {
			return bad("expected a double")
		}
		if d.Max > d.Min && (f < d.Min || f > d.Max) {
			return bad("expected a double %s", d.RangeString())
		}
	case TypeClass:
		if v != "" && strings.ContainsAny(v, " \t,") {
			return bad("expected a class name")
		}
	}
	if len(d.Enum) > 0 {
		elems := []string{v}
		if d.Type == TypeList {
			elems = listElems(v)
		}
		for _, e := range elems {
			if !slices.Contains(d.Enum, e) {
				what := "one of"
				if d.Type == TypeList {
					what = "a list of"
				}
				return bad("expected %s %s", what, strings.Join(d.Enum, ", "))
			}
		}
	}
	if d.Check != nil {
		if err := d.Check(v); err != nil {
			return bad("%v", err)
		}
	}
	if d.Refuse != nil {
		if why := d.Refuse(v); why != "" {
			shown := v
			if d.Type == TypePassword {
				shown = "[hidden]"
			}
			return fmt.Errorf("%s=%s is refused: %s", d.Name, shown, why)
		}
	}
	return nil
}

// article is the type's name with its indefinite article ("an int").
func (t Type) article() string {
	if t == TypeInt {
		return "an int"
	}
	return "a " + t.String()
}

// RangeString describes a numeric def's valid range ("at least 0", "in
// [0, 1]"), or "" when it has none beyond its type's.
func (d *Def) RangeString() string {
	if d.Max <= d.Min {
		return ""
	}
	if d.Max == math.MaxInt64 || (d.Type == TypeInt && d.Max == math.MaxInt32) || (d.Type == TypeShort && d.Max == math.MaxInt16) {
		return "at least " + formatBound(d.Min)
	}
	return "in [" + formatBound(d.Min) + ", " + formatBound(d.Max) + "]"
}

func formatBound(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e18 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// TopicConfig is the effective configuration of one topic: its explicitly
// set values over the broker's defaults.
type TopicConfig struct {
	// Set holds the values set on the topic itself (DYNAMIC_TOPIC_CONFIG).
	Set map[string]string
	// Broker provides defaults from server.properties / flags.
	Broker *Broker
}

// Source says where an effective value came from (DescribeConfigs sources).
type Source int8

// Sources, numbered as in DescribeConfigs v1+ (Kafka's ConfigSource).
const (
	// SourceTopic is DYNAMIC_TOPIC_CONFIG: set on the topic.
	SourceTopic Source = 1
	// SourceDynamicBroker is DYNAMIC_BROKER_CONFIG: set dynamically on
	// this broker.
	SourceDynamicBroker Source = 2
	// SourceDynamicDefault is DYNAMIC_DEFAULT_BROKER_CONFIG: the
	// cluster's dynamic default.
	SourceDynamicDefault Source = 3
	// SourceStaticBroker is STATIC_BROKER_CONFIG: server.properties or a
	// flag.
	SourceStaticBroker Source = 4
	// SourceDefault is DEFAULT_CONFIG: Kafka's default.
	SourceDefault Source = 5
	// SourceGroup is GROUP_CONFIG: set on a consumer or share group
	// (KIP-848).
	SourceGroup Source = 8
)

// Get returns the effective value of name and its source.
func (t TopicConfig) Get(name string) (string, Source) {
	if v, ok := t.Set[name]; ok {
		return v, SourceTopic
	}
	d, ok := topicDefByName[name]
	if !ok {
		return "", SourceDefault
	}
	if t.Broker != nil && d.BrokerName != "" {
		if v, src, ok := t.Broker.TopicDefaultSource(d.BrokerName); ok {
			return v, src
		}
	}
	return d.Default, SourceDefault
}

// Int64 returns the effective value of a numeric config; a malformed value
// falls back to the Kafka default.
func (t TopicConfig) Int64(name string) int64 {
	v, _ := t.Get(name)
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		d := topicDefByName[name]
		if d == nil {
			return 0
		}
		n, _ = strconv.ParseInt(d.Default, 10, 64)
	}
	return n
}

// Float64 returns the effective value of a double config; a malformed
// value falls back to the Kafka default.
func (t TopicConfig) Float64(name string) float64 {
	v, _ := t.Get(name)
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		if d := topicDefByName[name]; d != nil {
			f, _ = strconv.ParseFloat(d.Default, 64)
		}
	}
	return f
}

// checkThrottledReplicas checks a *.replication.throttled.replicas value
// as Kafka's ThrottledReplicaListValidator does: empty, "*", or
// partition:broker pairs.
func checkThrottledReplicas(v string) error {
	v = strings.TrimSpace(v)
	if v == "" || v == "*" {
		return nil
	}
	for _, e := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(e), ":")
		if ok {
			_, err1 := strconv.ParseUint(strings.TrimSpace(p), 10, 31)
			_, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 31)
			ok = err1 == nil && err2 == nil
		}
		if !ok {
			return fmt.Errorf("must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
		}
	}
	return nil
}

// CheckTopicConfigs applies the rules between topic configs that Kafka's
// LogConfig.validateValues applies to the values set on a topic:
// min.compaction.lag.ms may not exceed max.compaction.lag.ms. Each value
// has passed its Def's Validate.
func CheckTopicConfigs(set map[string]string) error {
	t := TopicConfig{Set: set}
	if lo, hi := t.Int64("min.compaction.lag.ms"), t.Int64("max.compaction.lag.ms"); lo > hi {
		return fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", lo, hi)
	}
	if t.Bool("remote.storage.enable") {
		return checkRemoteStorage(t)
	}
	return nil
}

// checkRemoteStorage applies Kafka's rules for a topic with remote
// storage on (LogConfig.validateValues with remote storage enabled, and
// validateRemoteStorageRetentionSize / validateRemoteStorageRetentionTime):
// a compacted topic cannot tier, and local.retention.* may not exceed
// retention.* (-2 follows them, -1 retention.* means unlimited).
func checkRemoteStorage(t TopicConfig) error {
	if _, compact := t.CleanupPolicy(); compact {
		return fmt.Errorf("remote log storage is not supported for compacted topics (cleanup.policy contains compact)")
	}
	for _, k := range []string{"bytes", "ms"} {
		local, whole := t.Int64("local.retention."+k), t.Int64("retention."+k)
		if local == -2 {
			continue
		}
		if whole != -1 && (local == -1 || local > whole) {
			return fmt.Errorf("invalid value %d for configuration local.retention.%s: value must not be more than retention.%s property value: %d", local, k, k, whole)
		}
	}
	return nil
}

// CheckTopicConfigChange applies the rules between a topic's configs
// before (cur) and after (next) a change: remote.storage.enable cannot be
// turned off once on (Kafka refuses it unless KIP-950's
// remote.log.delete.on.disable, which sluice does not have).
func CheckTopicConfigChange(cur, next map[string]string) error {
	if (TopicConfig{Set: cur}).Bool("remote.storage.enable") && !(TopicConfig{Set: next}).Bool("remote.storage.enable") {
		return fmt.Errorf("disabling remote storage on a topic is not supported")
	}
	return nil
}

// CleanupPolicy reports whether the effective cleanup.policy contains
// delete and compact (Kafka's LogConfig.delete and LogConfig.compact).
func (t TopicConfig) CleanupPolicy() (del, compact bool) {
	v, _ := t.Get("cleanup.policy")
	elems := listElems(v) // the elements Validate checked against the enum
	return slices.Contains(elems, "delete"), slices.Contains(elems, "compact")
}

// Bool returns the effective value of a boolean config.
func (t TopicConfig) Bool(name string) bool {
	v, _ := t.Get(name)
	return strings.EqualFold(strings.TrimSpace(v), "true")
}

// Names returns every topic config name, sorted.
func Names() []string {
	n := make([]string, 0, len(TopicDefs))
	for _, d := range TopicDefs {
		n = append(n, d.Name)
	}
	sort.Strings(n)
	return n
}
