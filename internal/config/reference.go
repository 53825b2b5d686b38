package config

import (
	"fmt"
	"strings"
)

//go:generate go test -run TestConfigurationReference -update-docs

// Reference renders docs/configuration.md: every broker setting and every
// topic config sluice knows, with type, default, valid values and what it
// does. TestConfigurationReference fails when the file is stale.
func Reference() string {
	var sb strings.Builder
	sb.WriteString(`# Configuration reference

<!-- Generated from internal/config (BrokerDefs, TopicDefs) by
     "go generate ./internal/config"; do not edit by hand. -->

Settings use Apache Kafka's names, types and ranges. They come from
Kafka's defaults, then the ` + "`--config`" + ` server.properties file, then the
flags of ` + "`sluice serve`" + ` (flags win). Every key is checked at start:

- an invalid value stops the node (exit status 1) with a message naming the
  key, the value and what is expected, e.g.
  ` + "`invalid value \"abc\" for log.retention.ms: expected a long`" + `;
- an unknown key is logged as a warning in Kafka's words
  (` + "`The configuration 'bogus.setting' was supplied but isn't a known config.`" + `)
  and the node starts, so a Kafka user's file works as it is;
- every known key has a status (the *status* column):
  - *implemented*: it has an effect (some values may still be refused,
    as the column says, e.g. ` + "`log.dirs`" + ` with several directories);
  - *ignored*: accepted and validated, but it changes nothing in sluice
    (harmless tuning of a mechanism sluice does not have); one WARN line
    at start names those set to a value other than their default;
  - *refused*: sluice does not implement what it asks for, and ignoring
    it would change cluster membership, durability, security or where
    data lives; its default (or a value asking for nothing sluice lacks,
    e.g. ` + "`transaction.two.phase.commit.enable=false`" + `) is accepted, the values
    the column names stop the node (exit status 1) with a message naming
    the key and why, e.g.
    ` + "`transaction.two.phase.commit.enable=true is refused: two-phase commit with an external transaction coordinator (KIP-939) is not implemented in sluice`" + `;
- the KRaft role keys are checked together after the flags, as Kafka does
  (` + "`process.roles`" + ` against ` + "`controller.quorum.voters`" + `), and a
  broker-only file that names no quorum (no ` + "`controller.quorum.voters`" + `,
  no ` + "`controller.quorum.bootstrap.servers`" + `, no formatted quorum) is
  refused, naming the key, instead of starting a single-node cluster of its
  own; a node that finds its quorum through
  ` + "`controller.quorum.bootstrap.servers`" + ` (KIP-853) follows it and learns
  the cluster id from it.

Keys starting with ` + "`listener.name.`" + ` (per-listener overrides) are accepted
without checks.

Settings marked *dynamic* may also be changed at run time, as Kafka's
dynamic broker configs (KIP-226): AlterConfigs or IncrementalAlterConfigs
on a BROKER resource (` + "`kafka-configs.sh --entity-type brokers`" + `,
` + "`sluice config set --broker`" + `), for one broker (*per-broker* and
*cluster-wide* settings) or as the cluster default (*cluster-wide* only).
The values are kept in the metadata log, survive restarts and win over
server.properties: the broker's own value, else the cluster default, else
the static value, else the default. Every topic default (` + "`log.retention.ms`" + `,
` + "`message.max.bytes`" + `, ...) is dynamic and re-applied to every topic at
once. Kafka's other dynamic settings that sluice reads only at start
(listeners, TLS and SASL settings, ` + "`producer.id.expiration.ms`" + `) are
refused at run time (INVALID_REQUEST), as are the read-only ones
(docs/operations.md, "Dynamic broker configs").

## Flags of ` + "`sluice serve`" + `

| flag | setting | default | valid values |
|---|---|---|---|
| ` + "`--node-id`" + ` | node.id | 1 | an int, at least 0 |
| ` + "`--listen`" + ` | listeners (the non-CONTROLLER entry) | 127.0.0.1:9092 | host:port |
| ` + "`--controller-listen`" + ` | listeners (the CONTROLLER entry) | the node's address in --voters; without --voters, a loopback port the system picks | host:port |
| ` + "`--voters`" + ` | controller.quorum.voters | the quorum ` + "`sluice storage format`" + ` wrote, else controller.quorum.bootstrap.servers' quorum, else none: a quorum of this node alone | id@host:port,... |
| ` + "`--data-dir`" + ` | log.dirs | ./sluice-data | a directory |
| ` + "`--http`" + ` | (sluice only) | off | host:port |
| ` + "`--config`" + ` | (a server.properties file) | none | a file |
| ` + "`--log-level`" + ` | (sluice only) | info | debug, info, warn, error |

## Broker settings (server.properties)

Coverage of Apache Kafka 4.2's broker keys (every name in Kafka 4.2's
broker configs reference, listed in
` + "`internal/config/testdata/kafka-4.2-broker-keys.txt`" + `): ` + KafkaCoverage().String() + `.
Keys Kafka 4.2 does not have (older Kafka keys, Kafka's authorizer
settings, KIP proposals) are marked *not a Kafka 4.2 broker key*; the
settings of sluice alone follow in their own table.

Topic-default settings (for example ` + "`log.retention.ms`" + ` for ` + "`retention.ms`" + `)
are checked with the topic config's rule.

| key | status | type | default | valid values | effect |
|---|---|---|---|---|---|
`)
	var own []*Def
	for _, d := range AllBrokerDefs() {
		if strings.HasPrefix(d.Name, "sluice.") {
			own = append(own, d)
			continue
		}
		writeRow(&sb, d)
	}
	sb.WriteString(`
## sluice-only settings

Settings of sluice alone (Kafka has no such key), in the same
server.properties.

| key | status | type | default | valid values | effect |
|---|---|---|---|---|---|
`)
	for _, d := range own {
		writeRow(&sb, d)
	}
	sb.WriteString(`
## Topic configs

Set with CreateTopics or IncrementalAlterConfigs (` + "`kafka-configs.sh`" + `,
kadm, any admin client); the broker setting in the second column provides
the default.

| config | broker default | type | default | valid values | effect |
|---|---|---|---|---|---|
`)
	for _, n := range Names() {
		d := topicDefByName[n]
		bn := "—"
		if d.BrokerName != "" {
			bn = "`" + d.BrokerName + "`"
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s | %s | %s |\n", d.Name, bn, d.Type, cell(d.Default), valid(d), escape(d.Doc))
	}
	sb.WriteString(`
## Group configs

Set on a GROUP resource (KIP-848, Kafka 4.0's GroupConfig) with
IncrementalAlterConfigs or AlterConfigs (` + "`kafka-configs.sh --entity-type groups`" + `,
` + "`sluice config set --group`" + `), for any group id, existing or not; kept in
the metadata log. A value must lie within the bounds of the broker settings
in the third column, and a session timeout must exceed its heartbeat
interval (INVALID_CONFIG otherwise). They set the session timeout and
heartbeat interval of the group's KIP-848 members (docs/kip848.md) at
their next heartbeat; a classic group ignores them.

| config | broker default | bounds | type | valid values | effect |
|---|---|---|---|---|---|
`)
	for _, d := range GroupDefs {
		bn, bounds := "—", "—"
		if d.BrokerName != "" {
			bn = "`" + d.BrokerName + "`"
		} else {
			bn = cell(d.Default)
		}
		if d.MinName != "" {
			bounds = "`" + d.MinName + "`, `" + d.MaxName + "`"
		}
		fmt.Fprintf(&sb, "| `%s` | %s | %s | %s | %s | %s |\n", d.Name, bn, bounds, d.Type, valid(&d.Def), escape(d.Doc))
	}
	return sb.String()
}

func writeRow(sb *strings.Builder, d *Def) {
	doc := d.Doc
	if m := DynamicMode(d.Name); m != ReadOnly {
		doc = "*Dynamic (" + m.String() + ").* " + doc
	}
	if !strings.HasPrefix(d.Name, "sluice.") && !IsKafka42Key(d.Name) {
		doc = "*Not a Kafka 4.2 broker key.* " + doc
	}
	fmt.Fprintf(sb, "| `%s` | %s | %s | %s | %s | %s |\n", d.Name, statusCell(d), d.Type, cell(d.Default), valid(d), escape(strings.TrimSpace(doc)))
}

// statusCell is the status column: the status, and the values refused.
func statusCell(d *Def) string {
	switch {
	case d.Status == StatusRefused && d.Refuses != "":
		return escape("**refused**: " + d.Refuses)
	case d.Status == StatusRefused:
		return "**refused**"
	case d.Refuses != "":
		return escape("implemented; refuses " + d.Refuses)
	}
	return d.Status.String()
}

func cell(def string) string {
	if def == "" {
		return "(none)"
	}
	return "`" + escape(def) + "`"
}

func valid(d *Def) string {
	var parts []string
	if r := d.RangeString(); r != "" {
		parts = append(parts, r)
	}
	if len(d.Enum) > 0 {
		if d.Type == TypeList {
			parts = append(parts, "a list of "+strings.Join(d.Enum, ", "))
		} else {
			parts = append(parts, "one of "+strings.Join(d.Enum, ", "))
		}
	}
	if d.Form != "" {
		parts = append(parts, d.Form)
	}
	if len(parts) == 0 {
		return "any " + d.Type.String()
	}
	return escape(strings.Join(parts, "; "))
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
