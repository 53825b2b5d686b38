package main

// sluice config: Kafka's kafka-configs.sh --describe and --alter
// --add-config, through DescribeConfigs and IncrementalAlterConfigs.

import (
	"fmt"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// configUsage is the usage text of `sluice config`.
const configUsage = `usage:
  sluice config get (--topic T | --broker ID) [--all]
  sluice config set --topic T key=value...

get lists the configs that are not at their default (set on the topic, or
in the broker's server.properties); --all lists every config with its
source. set changes topic configs incrementally (the others keep their
values); sluice topic alter --delete-config removes one.
`

func configCmd(args []string) error {
	return subcommand("config", configUsage, args, map[string]func([]string) error{
		"get": configGet,
		"set": configSet,
	})
}

// configEntry is one config in `config get` output.
type configEntry struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

func configGet(args []string) error {
	fs, o := newFlags("config get", configUsage)
	topic := fs.String("topic", "", "topic whose configs to show")
	broker := fs.Int("broker", -1, "broker id whose configs to show")
	all := fs.Bool("all", false, "also list the configs at their default")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || (*topic == "") == (*broker < 0) {
		return usageErrorf(configUsage, "config get needs exactly one of --topic T and --broker ID")
	}
	ctx, cancel := o.context()
	defer cancel()
	cl, adm, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	var rcs kadm.ResourceConfigs
	name := *topic
	if *topic != "" {
		if _, err := requireTopics(ctx, adm, *topic); err != nil {
			return err
		}
		rcs, err = adm.DescribeTopicConfigs(ctx, *topic)
	} else {
		name = strconv.Itoa(*broker)
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(md.Brokers.NodeIDs(), int32(*broker)) {
			return fmt.Errorf("broker %d does not exist (brokers: %s)", *broker, ints(md.Brokers.NodeIDs()))
		}
		rcs, err = adm.DescribeBrokerConfigs(ctx, int32(*broker))
	}
	if err != nil {
		return err
	}
	rc, err := rcs.On(name, nil)
	if err != nil {
		return err
	}
	if rc.Err != nil {
		if *topic != "" {
			return topicErr(*topic, rc.Err, rc.ErrMessage)
		}
		return fmt.Errorf("broker %s: %s", name, kafkaErr(rc.Err, rc.ErrMessage))
	}
	entries := []configEntry{}
	for _, c := range rc.Configs {
		if !*all && c.Source == kmsg.ConfigSourceDefaultConfig {
			continue
		}
		entries = append(entries, configEntry{Key: c.Key, Value: configValue(c), Source: c.Source.String(), Sensitive: c.Sensitive})
	}
	slices.SortFunc(entries, func(a, b configEntry) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	kind := "topic"
	if *topic == "" {
		kind = "broker"
	}
	out := struct {
		Resource string        `json:"resource"`
		Name     string        `json:"name"`
		Configs  []configEntry `json:"configs"`
	}{kind, name, entries}
	return o.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "KEY\tVALUE\tSOURCE")
		for _, e := range entries {
			fmt.Fprintf(w, "%s\t%s\t%s\n", e.Key, e.Value, e.Source)
		}
	})
}

func configSet(args []string) error {
	fs, o := newFlags("config set", configUsage)
	topic := fs.String("topic", "", "topic whose configs to change")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *topic == "" || len(pos) == 0 {
		return usageErrorf(configUsage, "config set needs --topic T and one or more key=value")
	}
	kv, order, err := parseKV(configUsage, pos)
	if err != nil {
		return err
	}
	var alters []kadm.AlterConfig
	for _, k := range order {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(kv[k])})
	}
	return alterTopicConfigs(o, *topic, alters)
}
