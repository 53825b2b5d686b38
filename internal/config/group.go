package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// GroupDef is one group config (Kafka 4.0's GroupConfig, KIP-848): set
// on a GROUP resource with IncrementalAlterConfigs, defaulted by the
// broker setting BrokerName, bounded by the broker settings MinName and
// MaxName.
type GroupDef struct {
	Def
	// MinName and MaxName are the broker settings bounding the value
	// (GroupCoordinatorConfig's group.*.min/max.*), if any.
	MinName, MaxName string
}

// GroupDefs are the group configs, sorted by name. The consumer.* ones
// set a KIP-848 consumer group's session timeout and heartbeat interval,
// share.session.timeout.ms and share.heartbeat.interval.ms a share
// group's; the other share.* ones are read by the share partitions
// (Broker.GroupConfig, broker.Broker.GroupConfig).
var GroupDefs = []GroupDef{
	{Def: Def{Name: "consumer.heartbeat.interval.ms", Type: TypeInt, BrokerName: "group.consumer.heartbeat.interval.ms", Min: 1, Max: math.MaxInt32, Doc: "The heartbeat interval given to the members of a consumer group (KIP-848)."},
		MinName: "group.consumer.min.heartbeat.interval.ms", MaxName: "group.consumer.max.heartbeat.interval.ms"},
	{Def: Def{Name: "consumer.session.timeout.ms", Type: TypeInt, BrokerName: "group.consumer.session.timeout.ms", Min: 1, Max: math.MaxInt32, Doc: "The timeout to detect failed members of a consumer group (KIP-848)."},
		MinName: "group.consumer.min.session.timeout.ms", MaxName: "group.consumer.max.session.timeout.ms"},
	{Def: Def{Name: DLQCopyRecordConfig, Type: TypeBoolean, Default: "false", Doc: "Whether a share group's dead-letter records carry the key and value of the archived record as well as the __dlq.errors.* context headers (KIP-1191)."}},
	{Def: Def{Name: DLQTopicNameConfig, Type: TypeString, Default: "", Doc: "The dead-letter topic of a share group (KIP-1191, share.version 2): a record the group rejects or gives up on at share.delivery.count.limit is copied there before it is archived. Must start with errors.deadletterqueue.topic.name.prefix, not with __, and an existing topic must have errors.deadletterqueue.group.enable=true; empty sends nothing."}},
	{Def: Def{Name: "share.auto.offset.reset", Type: TypeString, Default: "latest", Check: checkShareAutoOffsetReset, Form: "earliest, latest or by_duration:<ISO-8601 duration>", Doc: "Where a share group starts reading a partition it has no state for (KIP-932): the log start, the log end, or the first record at most the duration old (Kafka's ShareGroupAutoOffsetResetStrategy)."}},
	{Def: Def{Name: "share.delivery.count.limit", Type: TypeInt, BrokerName: "group.share.delivery.count.limit", Min: 2, Max: 10, Doc: "How many times a share group delivers a record before archiving it (KIP-932)."}},
	{Def: Def{Name: "share.heartbeat.interval.ms", Type: TypeInt, BrokerName: "group.share.heartbeat.interval.ms", Min: 1, Max: math.MaxInt32, Doc: "The heartbeat interval given to the members of a share group (KIP-932)."},
		MinName: "group.share.min.heartbeat.interval.ms", MaxName: "group.share.max.heartbeat.interval.ms"},
	{Def: Def{Name: "share.isolation.level", Type: TypeString, Default: "read_uncommitted", Enum: []string{"read_committed", "read_uncommitted"}, Doc: "Whether a share group reads the records of aborted transactions (read_uncommitted) or only committed ones up to the last stable offset (KIP-932)."}},
	{Def: Def{Name: "share.record.lock.duration.ms", Type: TypeInt, BrokerName: "group.share.record.lock.duration.ms", Min: 1000, Max: math.MaxInt32, Doc: "How long a share group's delivered record stays locked for its consumer (KIP-932)."},
		MinName: "group.share.min.record.lock.duration.ms", MaxName: "group.share.max.record.lock.duration.ms"},
	{Def: Def{Name: "share.session.timeout.ms", Type: TypeInt, BrokerName: "group.share.session.timeout.ms", Min: 1, Max: math.MaxInt32, Doc: "The timeout to detect failed members of a share group (KIP-932)."},
		MinName: "group.share.min.session.timeout.ms", MaxName: "group.share.max.session.timeout.ms"},
}

// LookupGroupDef returns the definition of a group config.
func LookupGroupDef(name string) (*GroupDef, bool) {
	for i := range GroupDefs {
		if GroupDefs[i].Name == name {
			return &GroupDefs[i], true
		}
	}
	return nil, false
}

// GroupConfig returns the effective value of a group config: the group's
// own (SourceGroup), else the broker setting that defaults it, reported
// as SourceDefault as Kafka's ConfigHelper does.
func (b *Broker) GroupConfig(set map[string]string, name string) (string, Source) {
	if v, ok := set[name]; ok {
		return v, SourceGroup
	}
	d, ok := LookupGroupDef(name)
	if !ok {
		return "", SourceDefault
	}
	if d.BrokerName != "" {
		v, _, _ := b.Lookup(d.BrokerName)
		return v, SourceDefault
	}
	return d.Default, SourceDefault
}

// groupInt is the effective value of a numeric group config, or of a
// broker setting, as a number.
func groupInt(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n
}

// CheckGroupConfigs checks a group's whole set of configs as Kafka's
// GroupConfig.validate does: known names, values of their type, within
// the broker's group.*.min/max.* bounds, and each session timeout above
// its heartbeat interval. Every error is INVALID_CONFIG.
func CheckGroupConfigs(set map[string]string, b *Broker) error {
	bad := func(format string, args ...any) error {
		return &DynamicError{Code: kerr.InvalidConfig, Msg: fmt.Sprintf(format, args...)}
	}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		d, ok := LookupGroupDef(k)
		if !ok {
			return bad("Unknown group config name: %s", k)
		}
		if err := d.Validate(set[k]); err != nil {
			return bad("%v", err)
		}
	}
	for _, d := range GroupDefs {
		if d.MinName == "" {
			continue
		}
		v, _ := b.GroupConfig(set, d.Name)
		n := groupInt(v)
		if lo, _, _ := b.Lookup(d.MinName); n < groupInt(lo) {
			return bad("%s must be greater than or equal to %s", d.Name, d.MinName)
		}
		if hi, _, _ := b.Lookup(d.MaxName); n > groupInt(hi) {
			return bad("%s must be less than or equal to %s", d.Name, d.MaxName)
		}
	}
	for _, kind := range []string{"consumer", "share"} {
		s, _ := b.GroupConfig(set, kind+".session.timeout.ms")
		h, _ := b.GroupConfig(set, kind+".heartbeat.interval.ms")
		if groupInt(s) <= groupInt(h) {
			return bad("%s.session.timeout.ms must be greater than %s.heartbeat.interval.ms", kind, kind)
		}
	}
	return nil
}
