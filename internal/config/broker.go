package config

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Voter is one member of the controller quorum (controller.quorum.voters).
type Voter struct {
	ID   int32
	Addr string // host:port
}

// Broker is a node's configuration: the contract flags (README.md,
// "Commands") plus any Kafka broker setting by its Kafka name.
type Broker struct {
	// NodeID is node.id / --node-id. Default 1.
	NodeID int32
	// Listen is the address of the PLAINTEXT Kafka listener, or of the
	// first one (listeners / --listen; KafkaListeners lists them all).
	// Default 127.0.0.1:9092.
	Listen string
	// ControllerListen is the controller quorum listener
	// (--controller-listen). Empty on a broker-only node.
	ControllerListen string
	// Voters is controller.quorum.voters / --voters. Empty means a
	// single-node quorum of this node.
	Voters []Voter
	// DataDir is log.dirs / --data-dir. Default ./sluice-data.
	DataDir string
	// HTTP is the status/metrics listener (--http). Empty disables it.
	HTTP string
	// Props holds every setting by Kafka name (from --config and flags).
	Props map[string]string
	// dyn holds the dynamic configs from the metadata (dynamic.go).
	dyn dynamic
}

// Defaults returns the configuration `sluice serve` uses with no flags.
func Defaults() *Broker {
	return &Broker{NodeID: 1, Listen: "127.0.0.1:9092", DataDir: "./sluice-data", Props: map[string]string{}}
}

// BrokerDefaults are the broker settings sluice reads, with Kafka's defaults.
// DescribeConfigs on a broker resource lists them.
var BrokerDefaults = map[string]string{
	"auto.create.topics.enable":               "true",
	"num.partitions":                          "1",
	"default.replication.factor":              "1",
	"min.insync.replicas":                     "1",
	"message.max.bytes":                       "1048588",
	"socket.request.max.bytes":                "104857600",
	"replica.lag.time.max.ms":                 "30000",
	"broker.session.timeout.ms":               "9000",
	"broker.heartbeat.interval.ms":            "2000",
	"offsets.topic.num.partitions":            "50",
	"offsets.topic.replication.factor":        "3",
	"offsets.retention.minutes":               "10080",
	"group.initial.rebalance.delay.ms":        "3000",
	"log.retention.ms":                        "604800000",
	"log.retention.bytes":                     "-1",
	"log.segment.bytes":                       "1073741824",
	"log.roll.ms":                             "604800000",
	"log.retention.check.interval.ms":         "300000",
	"unclean.leader.election.enable":          "false",
	"max.connections":                         "10000",
	"max.connections.per.ip":                  "2147483647",
	"max.connections.per.ip.overrides":        "",
	"max.connection.creation.rate":            "2147483647",
	"quota.window.num":                        "11",
	"quota.window.size.seconds":               "1",
	"connections.max.idle.ms":                 "600000",
	"transactional.id.expiration.ms":          "604800000",
	"producer.id.expiration.ms":               "86400000",
	"delete.topic.enable":                     "true",
	"replica.fetch.max.bytes":                 "1048576",
	"replica.fetch.wait.max.ms":               "500",
	"replica.fetch.response.max.bytes":        "10485760",
	"auto.leader.rebalance.enable":            "true",
	"leader.imbalance.check.interval.seconds": "300",
	"log.cleaner.enable":                      "true",
	"log.cleaner.threads":                     "1",
	"log.cleaner.dedupe.buffer.size":          "134217728",
	"log.cleaner.io.max.bytes.per.second":     "1.7976931348623157E308",
	"log.cleaner.backoff.ms":                  "15000",
}

// TopicDefault returns the broker-level value that defaults a topic config,
// if one was configured: dynamically (this broker's value, else the
// cluster default; dynamic.go) or in server.properties and flags (Kafka's
// hours/minutes variants included).
func (b *Broker) TopicDefault(brokerName string) (string, bool) {
	v, _, ok := b.TopicDefaultSource(brokerName)
	return v, ok
}

// TopicDefaultSource is TopicDefault with the value's source
// (SourceDynamicBroker, SourceDynamicDefault or SourceStaticBroker).
func (b *Broker) TopicDefaultSource(brokerName string) (string, Source, bool) {
	l := b.dyn.load()
	if v, ok := l.broker[brokerName]; ok {
		return v, SourceDynamicBroker, true
	}
	if v, ok := l.cluster[brokerName]; ok {
		return v, SourceDynamicDefault, true
	}
	v, ok := b.staticTopicDefault(brokerName)
	return v, SourceStaticBroker, ok
}

// staticTopicDefault is the value server.properties or a flag gives a
// setting, Kafka's hours/minutes variants included.
func (b *Broker) staticTopicDefault(brokerName string) (string, bool) {
	if v, ok := b.Props[brokerName]; ok {
		return v, true
	}
	switch brokerName {
	case "log.retention.ms":
		if v, ok := b.Props["log.retention.minutes"]; ok {
			return scale(v, 60_000)
		}
		if v, ok := b.Props["log.retention.hours"]; ok {
			return scale(v, 3_600_000)
		}
	case "log.roll.ms":
		if v, ok := b.Props["log.roll.hours"]; ok {
			return scale(v, 3_600_000)
		}
	}
	return "", false
}

func scale(v string, by int64) (string, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return "", false
	}
	if n < 0 {
		return "-1", true
	}
	return strconv.FormatInt(n*by, 10), true
}

// Get returns a broker setting: explicitly configured, else Kafka's default.
func (b *Broker) Get(name string) (string, bool) {
	if v, ok := b.TopicDefault(name); ok {
		return v, true
	}
	v, ok := BrokerDefaults[name]
	return v, ok
}

// Int returns a numeric broker setting, or def if unset or malformed.
func (b *Broker) Int(name string, def int64) int64 {
	v, ok := b.Get(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return def
	}
	return n
}

// Bool returns a boolean broker setting, or def if unset.
func (b *Broker) Bool(name string, def bool) bool {
	v, ok := b.Get(name)
	if !ok {
		return def
	}
	return strings.EqualFold(strings.TrimSpace(v), "true")
}

// Names returns every broker setting that has a value, sorted.
func (b *Broker) Names() []string {
	seen := map[string]bool{}
	for k := range BrokerDefaults {
		seen[k] = true
	}
	for k := range b.Props {
		seen[k] = true
	}
	l := b.dyn.load()
	for k := range l.cluster {
		seen[k] = true
	}
	for k := range l.broker {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ParseProperties reads a Java-style .properties file (key=value or
// key: value, # and ! comments, trailing-backslash continuations).
func ParseProperties(r io.Reader) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cont string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cont != "" {
			line = cont + line
			cont = ""
		}
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont = strings.TrimSuffix(line, `\`)
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			props[line] = ""
			continue
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return props, sc.Err()
}

// LoadFile applies a server.properties file: every known setting is
// validated against its definition (an invalid value is an error naming
// the key, the value and what is expected), then the file fills Props and
// the contract fields that have Kafka names (node.id, listeners, log.dirs,
// controller.quorum.voters). Unknown keys are kept in Props; the caller
// warns about them (UnknownBrokerKeys). Flags applied afterwards override
// the file.
func (b *Broker) LoadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	props, err := ParseProperties(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := ValidateBrokerProps(props); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for k, v := range props {
		b.Props[k] = v
	}
	if v, ok := props["node.id"]; ok {
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		b.NodeID = int32(n)
	} else if v, ok := props["broker.id"]; ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil && n >= 0 {
			b.NodeID = int32(n)
		}
	}
	if v, ok := props["listeners"]; ok {
		// Listen is the PLAINTEXT listener, else the first Kafka one
		// (KafkaListeners); the others are read from Props.
		var kafka []Listener
		for _, l := range parseListenerList(v) {
			if l.Name == ControllerListenerName {
				b.ControllerListen = l.Addr
			} else if l.Addr != "" {
				kafka = append(kafka, l)
			}
		}
		if len(kafka) > 0 {
			b.Listen = kafka[primaryListener(kafka)].Addr
		}
	}
	if v, ok := props["log.dirs"]; ok && strings.TrimSpace(v) != "" {
		b.DataDir = strings.TrimSpace(strings.Split(v, ",")[0])
	} else if v, ok := props["log.dir"]; ok {
		b.DataDir = strings.TrimSpace(v)
	}
	if v, ok := props["controller.quorum.voters"]; ok {
		voters, err := ParseVoters(v)
		if err != nil {
			return fmt.Errorf("%s: controller.quorum.voters: %w", path, err)
		}
		b.Voters = voters
	}
	return nil
}

// splitListener splits "NAME://host:port" into its name and address.
func splitListener(l string) (string, string) {
	l = strings.TrimSpace(l)
	i := strings.Index(l, "://")
	if i < 0 {
		return "", l
	}
	return l[:i], l[i+3:]
}

// ParseVoters parses "1@host:port,2@host:port".
func ParseVoters(s string) ([]Voter, error) {
	var out []Voter
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		at := strings.IndexByte(part, '@')
		if at < 0 {
			return nil, fmt.Errorf("voter %q: want id@host:port", part)
		}
		id, err := strconv.ParseInt(part[:at], 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("voter %q: bad id", part)
		}
		if _, _, err := net.SplitHostPort(part[at+1:]); err != nil {
			return nil, fmt.Errorf("voter %q: %w", part, err)
		}
		out = append(out, Voter{ID: int32(id), Addr: part[at+1:]})
	}
	return out, nil
}
