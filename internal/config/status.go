package config

import (
	_ "embed"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Status is what sluice does with a broker setting it knows (the
// operator-safety rule: no setting that changes the cluster's shape is
// accepted silently).
type Status int8

// Statuses of a setting.
const (
	// StatusImplemented: the setting has an effect in sluice. Some values
	// may still be refused (Def.Refuse), e.g. log.dirs with several
	// directories.
	StatusImplemented Status = iota
	// StatusIgnored: accepted and validated, but changes nothing (harmless
	// tuning of a mechanism sluice does not have, such as a thread pool);
	// `sluice serve` logs a warning naming it when it is set to a value
	// other than its default.
	StatusIgnored
	// StatusRefused: sluice does not implement what the setting asks for,
	// and it would change cluster membership, durability, security or
	// where data lives: the default, or a value asking for nothing sluice
	// lacks, is accepted; any other value stops the node at start with a
	// message naming the key and why (Def.Refuse).
	StatusRefused
)

// String is the status as the reference shows it.
func (s Status) String() string {
	switch s {
	case StatusIgnored:
		return "ignored"
	case StatusRefused:
		return "refused"
	}
	return "implemented"
}

//go:embed testdata/kafka-4.2-broker-keys.txt
var kafka42Keys string

// KafkaBrokerKeys returns the names of Apache Kafka 4.2's broker settings
// (its generated broker configs reference), sorted.
func KafkaBrokerKeys() []string {
	var out []string
	for _, l := range strings.Split(kafka42Keys, "\n") {
		if l = strings.TrimSpace(l); l != "" && l[0] != '#' {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// Coverage counts Kafka 4.2's broker settings by their status in sluice.
type Coverage struct {
	// Implemented, Ignored and Refused count the keys of each status.
	Implemented, Ignored, Refused int
	// Missing are Kafka keys with no definition in sluice (none when the
	// table is complete; TestKafkaKeysHaveStatus checks it).
	Missing []string
}

// Total is the number of Kafka 4.2 broker keys.
func (c Coverage) Total() int { return c.Implemented + c.Ignored + c.Refused + len(c.Missing) }

// String is the summary line of docs/configuration.md.
func (c Coverage) String() string {
	s := fmt.Sprintf("%d implemented, %d ignored with a warning, %d refused, of Kafka 4.2's %d broker keys", c.Implemented, c.Ignored, c.Refused, c.Total())
	if len(c.Missing) > 0 {
		s += fmt.Sprintf(" (%d without a status: %s)", len(c.Missing), strings.Join(c.Missing, ", "))
	}
	return s
}

// KafkaCoverage returns the status counts of Kafka 4.2's broker keys.
func KafkaCoverage() Coverage {
	var c Coverage
	for _, k := range KafkaBrokerKeys() {
		d, ok := BrokerDef(k)
		switch {
		case !ok:
			c.Missing = append(c.Missing, k)
		case d.Status == StatusIgnored:
			c.Ignored++
		case d.Status == StatusRefused:
			c.Refused++
		default:
			c.Implemented++
		}
	}
	return c
}

var kafkaKeySet = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range KafkaBrokerKeys() {
		m[k] = true
	}
	return m
}()

// IsKafka42Key reports whether name is one of Kafka 4.2's broker keys.
func IsKafka42Key(name string) bool { return kafkaKeySet[name] }

// IsDefault reports whether v is the setting's default value, compared as
// Kafka parses it (numbers by value, booleans without case, list elements
// trimmed); an empty value is the default of a setting without one.
func (d *Def) IsDefault(v string) bool {
	v = strings.TrimSpace(v)
	def := strings.TrimSpace(d.Default)
	if v == def {
		return true
	}
	switch d.Type {
	case TypeBoolean:
		return strings.EqualFold(v, def)
	case TypeInt, TypeLong, TypeShort, TypeDouble:
		a, err1 := strconv.ParseFloat(v, 64)
		b, err2 := strconv.ParseFloat(def, 64)
		return err1 == nil && err2 == nil && a == b
	case TypeList:
		return strings.Join(listElems(v), ",") == strings.Join(listElems(def), ",")
	}
	return false
}

// IgnoredBrokerKeys returns, sorted, the keys of props that sluice
// accepts but ignores (StatusIgnored) and that are set to a value other
// than their default: `sluice serve` warns about them. Per-listener
// overrides (listener.name.<l>.<setting>) count as their setting.
func IgnoredBrokerKeys(props map[string]string) []string {
	var out []string
	for k, v := range props {
		d, ok := BrokerDef(k)
		if !ok {
			_, d, ok = listenerOverride(k)
		}
		if ok && d.Status == StatusIgnored && !d.IsDefault(v) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// refuseUnlessEmpty is a Def.Refuse that accepts only an empty value:
// any other asks for a mechanism sluice does not have (what, e.g. "a
// custom principal builder").
func refuseUnlessEmpty(what string) func(string) string {
	return func(v string) string {
		if strings.TrimSpace(v) == "" {
			return ""
		}
		return what + " is not implemented in sluice"
	}
}

// refuseTrue is a Def.Refuse for a boolean that turns on something sluice
// does not implement (what).
func refuseTrue(what string) func(string) string {
	return func(v string) string {
		if strings.EqualFold(strings.TrimSpace(v), "true") {
			return what + " is not implemented in sluice"
		}
		return ""
	}
}

// refuseOtherThan is a Def.Refuse accepting an empty value or one of ok
// (class names, compared exactly): any other asks for what sluice does
// not implement.
func refuseOtherThan(what string, ok ...string) func(string) string {
	return func(v string) string {
		v = strings.TrimSpace(v)
		if v == "" {
			return ""
		}
		for _, o := range ok {
			if v == o {
				return ""
			}
		}
		return what + " is not implemented in sluice"
	}
}

// refuseSeveralDirs refuses a list of more than one directory: sluice
// keeps all its data in one directory, and silently using the first would
// put data where the operator did not ask.
func refuseSeveralDirs(v string) string {
	if len(listElems(v)) > 1 {
		return "sluice does not implement more than one log directory (JBOD): it keeps all its data in one directory; list one"
	}
	return ""
}

// refuseControllerListenerNames accepts CONTROLLER, the name of sluice's
// controller listener, as controller.listener.names.
func refuseControllerListenerNames(v string) string {
	for _, n := range listElems(v) {
		if !strings.EqualFold(n, ControllerListenerName) {
			return "sluice's controller listener is the one named " + ControllerListenerName + " (a listener named " + n + " would serve clients, not the quorum)"
		}
	}
	return ""
}

// CheckDirs refuses a metadata.log.dir other than the data directory:
// sluice keeps its metadata log there (under __raft), and starting with
// it elsewhere than the operator asked would put data where they did not
// expect it. Called after the flags (--data-dir) are applied.
func (b *Broker) CheckDirs() error {
	v := strings.TrimSpace(b.Props["metadata.log.dir"])
	if v == "" || filepath.Clean(v) == filepath.Clean(b.DataDir) {
		return nil
	}
	return fmt.Errorf("metadata.log.dir=%s is refused: sluice does not implement a metadata log directory apart from the data directory (%s), where it keeps the metadata log: leave metadata.log.dir unset or set it to the data directory", v, b.DataDir)
}
