package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Dynamic broker configs (KIP-226, Kafka's DynamicBrokerConfig): some
// broker settings may be changed at run time with AlterConfigs or
// IncrementalAlterConfigs on a BROKER resource, for one broker (the
// resource name is its id) or as the cluster default (the empty name).
// They are stored in the metadata log and win over server.properties:
// a broker's own value, else the cluster default, else the static value
// (server.properties and flags), else Kafka's default.
//
// sluice accepts at run time the settings Kafka allows dynamically that
// it either applies live or accepts with no effect (StatusIgnored). Those it
// reads only at start (listeners, SASL and TLS settings, the replica
// machine's producer.id.expiration.ms, ...) are refused, as are the
// settings Kafka does not allow dynamically.

// UpdateMode is how a broker setting may be changed at run time (Kafka's
// DynamicBrokerConfig.dynamicConfigUpdateModes).
type UpdateMode int8

// Update modes.
const (
	// ReadOnly settings are changed in server.properties and a restart.
	ReadOnly UpdateMode = iota
	// PerBroker settings are changed for one broker at a time.
	PerBroker
	// ClusterWide settings are changed for one broker or as the cluster
	// default.
	ClusterWide
)

// String is Kafka's name of the mode.
func (m UpdateMode) String() string {
	switch m {
	case PerBroker:
		return "per-broker"
	case ClusterWide:
		return "cluster-wide"
	}
	return "read-only"
}

// kafkaClusterWide are the cluster-wide dynamic settings of Kafka that
// sluice knows, besides the topic-default synonyms (DynamicLogConfig, all
// but log.message.format.version): LogCleaner.ReconfigurableConfigs,
// DynamicThreadPool, metric.reporters, SocketServer's connection limits,
// DynamicProducerStateManagerConfig and QuotaConfig.brokerQuotaConfigs.
var kafkaClusterWide = []string{
	"log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
	"log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
	"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads",
	"metric.reporters",
	"max.connections", "max.connection.creation.rate", "num.network.threads",
	"max.connections.per.ip", "max.connections.per.ip.overrides",
	"producer.id.expiration.ms", "transaction.partition.verification.enable",
	"leader.replication.throttled.rate", "follower.replication.throttled.rate",
	DLQAutoCreateConfig, DLQTopicPrefixConfig,
}

// kafkaPerBroker are Kafka's per-broker dynamic settings that sluice
// knows (DynamicListenerConfig.ReconfigurableConfigs).
var kafkaPerBroker = []string{
	"listeners", "advertised.listeners", "listener.security.protocol.map",
	"principal.builder.class", "ssl.protocol", "ssl.cipher.suites", "ssl.enabled.protocols",
	"ssl.client.auth", "ssl.endpoint.identification.algorithm",
	"sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
	"sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
	"sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
	"sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
	"sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
	"sasl.login.refresh.buffer.seconds",
}

// kafkaListenerOnly are Kafka's dynamic TLS store settings
// (SslConfigs.RECONFIGURABLE_CONFIGS): only per listener, with the
// listener.name.<listener>. prefix.
var kafkaListenerOnly = []string{
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
	"ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
	"ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
}

// liveDynamic are the settings sluice reads again when a dynamic value
// changes (besides the topic-default synonyms, which re-apply every
// topic's effective config). A Kafka-dynamic setting that is neither
// here, a topic default, nor ignored is read at start only and refused
// at run time.
var liveDynamic = []string{
	"log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
	"num.recovery.threads.per.data.dir",
	"max.connections", "max.connection.creation.rate", "max.connections.per.ip", "max.connections.per.ip.overrides",
	"transaction.partition.verification.enable",
	"leader.replication.throttled.rate", "follower.replication.throttled.rate",
	DLQAutoCreateConfig, DLQTopicPrefixConfig,
}

// kafkaModes holds Kafka's update mode of every dynamic setting sluice
// knows; startOnly the Kafka-dynamic ones sluice reads at start only.
var kafkaModes, startOnly = func() (map[string]UpdateMode, map[string]bool) {
	m := map[string]UpdateMode{}
	for _, n := range kafkaClusterWide {
		m[n] = ClusterWide
	}
	for _, d := range TopicDefs {
		if d.BrokerName != "" && d.BrokerName != "log.message.format.version" {
			m[d.BrokerName] = ClusterWide
		}
	}
	for _, n := range kafkaPerBroker {
		m[n] = PerBroker
	}
	start := map[string]bool{}
	for n := range m {
		d, ok := BrokerDef(n)
		if !ok {
			panic("config: dynamic setting " + n + " has no definition")
		}
		if d.Synonym == "" && d.Status != StatusIgnored && !slices.Contains(liveDynamic, n) {
			start[n] = true
		}
	}
	return m, start
}()

// DynamicMode returns how name may be changed at run time in sluice:
// Kafka's mode, or ReadOnly when Kafka does not allow it or sluice reads
// it only at start.
func DynamicMode(name string) UpdateMode {
	if startOnly[name] {
		return ReadOnly
	}
	return kafkaModes[name]
}

// DynamicError is a refused dynamic broker config: its Code is Kafka's
// error (INVALID_REQUEST for a setting that may not change at run time or
// a bad value, as Kafka's ConfigAdminManager answers; INVALID_CONFIG for
// an unknown name).
type DynamicError struct {
	Code *kerr.Error
	Msg  string
}

func (e *DynamicError) Error() string { return e.Msg }

// Unwrap lets errors.Is and errors.As see the Kafka error.
func (e *DynamicError) Unwrap() error { return e.Code }

// kafkaSet renders names as Kafka's messages do (a Scala Set).
func kafkaSet(names []string) string {
	sort.Strings(names)
	return "Set(" + strings.Join(names, ", ") + ")"
}

// CheckDynamicBrokerConfigs checks a resource's whole set of dynamic
// broker configs, as Kafka's DynamicBrokerConfig.validateConfigs does:
// no read-only setting ("Cannot update these configs dynamically"), no
// TLS store setting without a listener prefix, every value valid for its
// definition, and per-broker settings only on a broker resource (perBroker
// false is the cluster default). sluice also refuses names it does not
// know (Kafka would keep them as custom configs) and the settings it
// reads at start only.
func CheckDynamicBrokerConfigs(set map[string]string, perBroker bool) error {
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	var readOnly, unprefixed, unknown, atStart, perBrokerOnly []string
	for _, k := range names {
		switch {
		case slices.Contains(kafkaListenerOnly, k):
			unprefixed = append(unprefixed, k)
		case strings.HasPrefix(k, "listener.name."):
			if _, _, ok := listenerOverride(k); !ok {
				unknown = append(unknown, k)
			} else {
				atStart = append(atStart, k)
			}
		case startOnly[k]:
			atStart = append(atStart, k)
		case kafkaModes[k] != ReadOnly:
			if kafkaModes[k] == PerBroker && !perBroker {
				perBrokerOnly = append(perBrokerOnly, k)
			}
		default:
			if _, ok := BrokerDef(k); ok {
				readOnly = append(readOnly, k)
			} else {
				unknown = append(unknown, k)
			}
		}
	}
	invalid := func(format string, args ...any) error {
		return &DynamicError{Code: kerr.InvalidRequest, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case len(readOnly) > 0:
		return invalid("Cannot update these configs dynamically: %s", kafkaSet(readOnly))
	case len(unprefixed) > 0:
		return invalid("These security configs can be dynamically updated only per-listener using the listener prefix: %s", kafkaSet(unprefixed))
	case len(atStart) > 0:
		return invalid("Cannot update these configs dynamically: %s (sluice reads them at start only: set them in server.properties and restart)", kafkaSet(atStart))
	case len(unknown) > 0:
		return &DynamicError{Code: kerr.InvalidConfig, Msg: fmt.Sprintf("Unknown broker configs: %s", kafkaSet(unknown))}
	}
	for _, k := range names {
		d, _ := BrokerDef(k)
		if err := d.Validate(set[k]); err != nil {
			// KAFKA-13609: Kafka answers a value that fails validation
			// with INVALID_REQUEST on a BROKER resource.
			return invalid("%v", err)
		}
	}
	if len(perBrokerOnly) > 0 {
		return invalid("Cannot update these configs at default cluster level, broker id must be specified: %s", kafkaSet(perBrokerOnly))
	}
	return nil
}

// dynLayers are a broker's dynamic configs: its own, and the cluster
// default. Both are immutable once published.
type dynLayers struct {
	broker, cluster map[string]string
}

// dynamic holds the layers; a Broker's zero value has none.
type dynamic struct {
	p atomic.Pointer[dynLayers]
}

func (d *dynamic) load() *dynLayers {
	if l := d.p.Load(); l != nil {
		return l
	}
	return &dynLayers{}
}

// SetDynamic installs the dynamic configs of this broker (perBroker) and
// of the cluster (cluster), as stored in the metadata; it reports whether
// the effective values changed. Entries that do not pass
// CheckDynamicBrokerConfigs one by one (written by another version, or a
// per-broker setting in the cluster default) are ignored, as Kafka's
// DynamicBrokerConfig.fromPersistentProps ignores them.
func (b *Broker) SetDynamic(cluster, perBroker map[string]string) bool {
	next := &dynLayers{broker: usableDynamic(perBroker, true), cluster: usableDynamic(cluster, false)}
	cur := b.dyn.load()
	if mapsEqual(cur.broker, next.broker) && mapsEqual(cur.cluster, next.cluster) {
		return false
	}
	b.dyn.p.Store(next)
	return true
}

// Dynamic returns the dynamic configs in effect: the cluster default and
// this broker's own. Callers must not modify them.
func (b *Broker) Dynamic() (cluster, perBroker map[string]string) {
	l := b.dyn.load()
	return l.cluster, l.broker
}

func usableDynamic(set map[string]string, perBroker bool) map[string]string {
	out := map[string]string{}
	for k, v := range set {
		if CheckDynamicBrokerConfigs(map[string]string{k: v}, perBroker) == nil {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Lookup returns the effective value of a broker setting and where it
// comes from: this broker's dynamic value (SourceDynamicBroker), the
// cluster default (SourceDynamicDefault), server.properties or a flag
// (SourceStaticBroker, with Kafka's hours/minutes synonyms), else Kafka's
// default (SourceDefault). ok is false for a setting with no value.
func (b *Broker) Lookup(name string) (value string, src Source, ok bool) {
	l := b.dyn.load()
	if v, ok := l.broker[name]; ok {
		return v, SourceDynamicBroker, true
	}
	if v, ok := l.cluster[name]; ok {
		return v, SourceDynamicDefault, true
	}
	if v, ok := b.staticTopicDefault(name); ok {
		return v, SourceStaticBroker, true
	}
	if v, ok := BrokerDefaults[name]; ok {
		return v, SourceDefault, true
	}
	if d, ok := BrokerDef(name); ok && d.Default != "" {
		return d.Default, SourceDefault, true
	}
	return "", SourceDefault, false
}
