package admin

// sluice config: Kafka's kafka-configs.sh --describe, --alter --add-config
// and --alter --delete-config, through DescribeConfigs and
// IncrementalAlterConfigs, on a topic, a broker (dynamic broker configs,
// KIP-226), the cluster's broker defaults (kafka-configs.sh
// --entity-default) or a group (KIP-848 group configs).

import (
	"context"
	"flag"
	"fmt"
	"github.com/twmb/franz-go/pkg/kgo"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// configUsage is the usage text of `sluice config`.
const configUsage = `usage:
  sluice config get TARGET [--all]
  sluice config set TARGET key=value...
  sluice config delete TARGET key...

TARGET is one of:
  --topic T            a topic's configs
  --broker ID          a broker's settings; set and delete change its dynamic configs
  --broker-defaults    the cluster's dynamic broker defaults (Kafka's --entity-default)
  --group G            a group's configs (consumer.session.timeout.ms, ...)
  or kafka-configs.sh's --entity-type topics|brokers|groups --entity-name N
  (--entity-type brokers --entity-default for the broker defaults)

set also takes kafka-configs.sh's --add-config k=v,k2=[a,b] and delete its
--delete-config k,k2, as well as the positional key=value and key.

get lists the configs that are not at their default (set on the topic or
group, dynamically on the broker or the cluster, or in the broker's
server.properties); --all lists every config with its source. set changes
configs incrementally (the others keep their values); delete removes them
(back to the broker default or the server.properties value).
`

func (c *cli) configCmd(args []string) error {
	return c.subcommand("config", configUsage, args, map[string]func([]string) error{
		"get":    c.configGet,
		"set":    c.configSet,
		"delete": c.configDelete,
	})
}

// configEntry is one config in `config get` output.
type configEntry struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

// configTarget is the resource a config command acts on.
type configTarget struct {
	typ  kmsg.ConfigResourceType
	name string // the resource name: "" for the broker defaults
	kind string // topic, broker, broker-defaults, group
}

// what names the target in messages.
func (t configTarget) what() string {
	switch t.kind {
	case "broker-defaults":
		return "the cluster's broker defaults"
	}
	return t.kind + " " + t.name
}

// targetFlags defines the TARGET flags on fs; the returned function reads
// them once parsed (exactly one must be given).
func targetFlags(fs *flag.FlagSet) func(verb string) (configTarget, error) {
	topic := fs.String("topic", "", "topic")
	broker := fs.Int("broker", -1, "broker id")
	defaults := fs.Bool("broker-defaults", false, "the cluster's dynamic broker defaults")
	group := fs.String("group", "", "group id")
	// kafka-configs.sh's --entity-type topics|brokers|groups with
	// --entity-name N or --entity-default.
	entityType := fs.String("entity-type", "", "topics, brokers or groups (kafka-configs.sh)")
	entityName := fs.String("entity-name", "", "the entity (kafka-configs.sh)")
	entityDefault := fs.Bool("entity-default", false, "the entity type's default (kafka-configs.sh; brokers only)")
	return func(verb string) (configTarget, error) {
		var ts []configTarget
		if *entityType != "" || *entityName != "" || *entityDefault {
			switch et := strings.TrimSuffix(*entityType, "s"); {
			case et == "broker" && *entityDefault && *entityName == "":
				ts = append(ts, configTarget{kmsg.ConfigResourceTypeBroker, "", "broker-defaults"})
			case *entityDefault || *entityName == "":
				return configTarget{}, usageErrorf(configUsage, "config %s: --entity-type %s needs --entity-name (--entity-default only with brokers)", verb, *entityType)
			case et == "topic":
				ts = append(ts, configTarget{kmsg.ConfigResourceTypeTopic, *entityName, "topic"})
			case et == "broker":
				if _, err := strconv.ParseInt(*entityName, 10, 32); err != nil {
					return configTarget{}, usageErrorf(configUsage, "config %s: --entity-name %q is not a broker id", verb, *entityName)
				}
				ts = append(ts, configTarget{kmsg.ConfigResourceTypeBroker, *entityName, "broker"})
			case et == "group":
				ts = append(ts, configTarget{kmsg.ConfigResourceTypeGroupConfig, *entityName, "group"})
			case et == "user" || et == "client":
				return configTarget{}, usageErrorf(configUsage, "config %s: --entity-type %s: use `sluice quota` (quotas) or `sluice user` (SCRAM credentials)", verb, *entityType)
			default:
				return configTarget{}, usageErrorf(configUsage, "config %s: invalid --entity-type %q: expected topics, brokers or groups", verb, *entityType)
			}
		}
		if *topic != "" {
			ts = append(ts, configTarget{kmsg.ConfigResourceTypeTopic, *topic, "topic"})
		}
		if *broker >= 0 {
			ts = append(ts, configTarget{kmsg.ConfigResourceTypeBroker, strconv.Itoa(*broker), "broker"})
		}
		if *defaults {
			ts = append(ts, configTarget{kmsg.ConfigResourceTypeBroker, "", "broker-defaults"})
		}
		if *group != "" {
			ts = append(ts, configTarget{kmsg.ConfigResourceTypeGroupConfig, *group, "group"})
		}
		if len(ts) != 1 {
			return configTarget{}, usageErrorf(configUsage, "config %s needs exactly one of --topic T, --broker ID, --broker-defaults and --group G", verb)
		}
		return ts[0], nil
	}
}

// checkTarget fails on a topic or broker that does not exist.
func checkTarget(ctx context.Context, adm *kadm.Client, t configTarget) error {
	switch t.kind {
	case "topic":
		_, err := requireTopics(ctx, adm, t.name)
		return err
	case "broker":
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		id, _ := strconv.Atoi(t.name)
		if !slices.Contains(md.Brokers.NodeIDs(), int32(id)) {
			return fmt.Errorf("broker %d does not exist (brokers: %s)", id, ints(md.Brokers.NodeIDs()))
		}
	}
	return nil
}

// targetErr is the message of an error on the target.
func targetErr(t configTarget, code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	m := ""
	if msg != nil {
		m = *msg
	}
	if t.kind == "topic" {
		return topicErr(t.name, err, m)
	}
	return fmt.Errorf("%s: %s", t.what(), kafkaErr(err, m))
}

func (c *cli) configGet(args []string) error {
	fs, o := c.newFlags("config get", configUsage)
	target := targetFlags(fs)
	all := fs.Bool("all", false, "also list the configs at their default")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	t, err := target("get")
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(configUsage, "config get takes no arguments")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if err := checkTarget(ctx, adm, t); err != nil {
			return err
		}
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = t.typ, t.name
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Resources) != 1 {
			return fmt.Errorf("%s: %d resources in the answer", t.what(), len(resp.Resources))
		}
		res := resp.Resources[0]
		if err := targetErr(t, res.ErrorCode, res.ErrorMessage); err != nil {
			return err
		}
		entries := []configEntry{}
		for _, c := range res.Configs {
			if !*all && c.Source == kmsg.ConfigSourceDefaultConfig {
				continue
			}
			kc := kadm.Config{Key: c.Name, Value: c.Value, Sensitive: c.IsSensitive}
			entries = append(entries, configEntry{Key: c.Name, Value: configValue(kc), Source: c.Source.String(), Sensitive: c.IsSensitive})
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
		out := struct {
			Resource string        `json:"resource"`
			Name     string        `json:"name"`
			Configs  []configEntry `json:"configs"`
		}{t.kind, t.name, entries}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "KEY\tVALUE\tSOURCE")
			for _, e := range entries {
				fmt.Fprintf(w, "%s\t%s\t%s\n", e.Key, e.Value, e.Source)
			}
		})
	})
}

func (c *cli) configSet(args []string) error {
	fs, o := c.newFlags("config set", configUsage)
	target := targetFlags(fs)
	fs.Var(addConfigList{&o.named}, "add-config", "k=v,k2=[a,b] (kafka-configs.sh's form of the key=value arguments)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	t, err := target("set")
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(configUsage, "config set needs one or more key=value")
	}
	kv, order, err := parseKV(configUsage, pos)
	if err != nil {
		return err
	}
	var alters []kadm.AlterConfig
	for _, k := range order {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(kv[k])})
	}
	if t.kind == "topic" {
		return alterTopicConfigs(o, t.name, alters)
	}
	return alterResourceConfigs(o, t, alters)
}

func (c *cli) configDelete(args []string) error {
	fs, o := c.newFlags("config delete", configUsage)
	target := targetFlags(fs)
	fs.Var(commaList{&o.named}, "delete-config", "k[,k2] (kafka-configs.sh's form of the key arguments)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	t, err := target("delete")
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(configUsage, "config delete needs one or more keys")
	}
	var alters []kadm.AlterConfig
	for _, k := range pos {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if t.kind == "topic" {
		return alterTopicConfigs(o, t.name, alters)
	}
	return alterResourceConfigs(o, t, alters)
}

// alterResourceConfigs sends an IncrementalAlterConfigs for a broker, the
// broker defaults or a group (a broker's own change goes to that broker,
// as kafka-configs.sh sends it).
func alterResourceConfigs(o *adminOpts, t configTarget, alters []kadm.AlterConfig) error {
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if err := checkTarget(ctx, adm, t); err != nil {
			return err
		}
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = t.typ, t.name
		for _, a := range alters {
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = a.Name, a.Value
			c.Op = kmsg.IncrementalAlterConfigOpSet
			if a.Op == kadm.DeleteConfig {
				c.Op = kmsg.IncrementalAlterConfigOpDelete
			}
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		var resp *kmsg.IncrementalAlterConfigsResponse
		var err error
		if t.kind == "broker" {
			// The broker's own change is checked by that broker.
			id, _ := strconv.Atoi(t.name)
			resp, err = req.RequestWith(ctx, cl.Broker(id))
		} else {
			resp, err = req.RequestWith(ctx, cl)
		}
		if err != nil {
			return err
		}
		if len(resp.Resources) != 1 {
			return fmt.Errorf("%s: %d resources in the answer", t.what(), len(resp.Resources))
		}
		if err := targetErr(t, resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage); err != nil {
			return err
		}
		out := struct {
			Resource string            `json:"resource"`
			Name     string            `json:"name"`
			Set      map[string]string `json:"set,omitempty"`
			Deleted  []string          `json:"deleted,omitempty"`
		}{Resource: t.kind, Name: t.name}
		out.Set, out.Deleted = splitAlters(alters)
		return o.emit(out, func(w *tabwriter.Writer) {
			for _, k := range sortedKeys(out.Set) {
				fmt.Fprintf(w, "Set %s=%s on %s.\n", k, out.Set[k], t.what())
			}
			for _, k := range out.Deleted {
				fmt.Fprintf(w, "Deleted %s from %s.\n", k, t.what())
			}
		})
	})
}

// splitAlters returns the values alters set (nil if none) and the names it
// deletes, as the set and delete commands report them.
func splitAlters(alters []kadm.AlterConfig) (set map[string]string, deleted []string) {
	for _, a := range alters {
		if a.Op == kadm.SetConfig {
			if set == nil {
				set = map[string]string{}
			}
			set[a.Name] = *a.Value
		} else {
			deleted = append(deleted, a.Name)
		}
	}
	return set, deleted
}
