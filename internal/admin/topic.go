package admin

// sluice topic: Kafka's kafka-topics.sh (--create, --list, --describe,
// --alter --partitions, --delete) and the topic half of kafka-configs.sh
// (--alter --add-config / --delete-config), through kadm.

import (
	"context"
	"fmt"
	"github.com/twmb/franz-go/pkg/kgo"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicUsage is the usage text of `sluice topic`.
const topicUsage = `usage:
  sluice topic create NAME [--partitions N] [--replication-factor N] [--config k=v ...]
  sluice topic list [--internal]
  sluice topic describe NAME...
  sluice topic alter NAME [--config k=v ...] [--delete-config k ...]
  sluice topic add-partitions NAME --count N
  sluice topic delete NAME...

--partitions and --replication-factor default to the broker's num.partitions
and default.replication.factor. add-partitions --count is the topic's new
total number of partitions (Kafka's kafka-topics --alter --partitions).
alter changes configs incrementally (IncrementalAlterConfigs).

Kafka's names are accepted too: the topic names as --topic NAME
(kafka-topics.sh), add-partitions --partitions N for --count, and for
create and alter kafka-configs.sh's --add-config k=v,k2=[a,b] and
--delete-config k,k2.
`

func (c *cli) topicCmd(args []string) error {
	return c.subcommand("topic", topicUsage, args, map[string]func([]string) error{
		"create":         c.topicCreate,
		"list":           c.topicList,
		"describe":       c.topicDescribe,
		"alter":          c.topicAlter,
		"add-partitions": c.topicAddPartitions,
		"delete":         c.topicDelete,
	})
}

// topicInfo is a topic in `topic list` and `topic describe` output.
type topicInfo struct {
	Name              string            `json:"name"`
	ID                string            `json:"id,omitempty"`
	Internal          bool              `json:"internal,omitempty"`
	PartitionCount    int               `json:"partition_count"`
	ReplicationFactor int               `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
	Partitions        []partitionInfo   `json:"partitions,omitempty"`
}

// partitionInfo is one partition's placement and state.
type partitionInfo struct {
	Topic       string  `json:"topic,omitempty"`
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	// ELR and LastKnownELR are the eligible leader replicas (KIP-966),
	// from DescribeTopicPartitions; left out by a broker without it.
	ELR             []int32 `json:"elr,omitempty"`
	LastKnownELR    []int32 `json:"last_known_elr,omitempty"`
	OfflineReplicas []int32 `json:"offline_replicas,omitempty"`
	Error           string  `json:"error,omitempty"`
}

func newTopicInfo(d kadm.TopicDetail) topicInfo {
	return topicInfo{
		Name:              d.Topic,
		ID:                topicID(d.ID),
		Internal:          d.IsInternal,
		PartitionCount:    len(d.Partitions),
		ReplicationFactor: d.Partitions.NumReplicas(),
	}
}

func newPartitionInfo(p kadm.PartitionDetail) partitionInfo {
	pi := partitionInfo{
		Partition:       p.Partition,
		Leader:          p.Leader,
		LeaderEpoch:     p.LeaderEpoch,
		Replicas:        nonNil(p.Replicas),
		ISR:             nonNil(p.ISR),
		OfflineReplicas: p.OfflineReplicas,
	}
	if p.Err != nil {
		pi.Error = p.Err.Error()
	}
	return pi
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func (c *cli) topicCreate(args []string) error {
	fs, o := c.newFlags("topic create", topicUsage)
	o.posFlag(fs, "topic")
	partitions := fs.Int("partitions", -1, "number of partitions (-1: the broker's num.partitions)")
	rf := fs.Int("replication-factor", -1, "replicas per partition (-1: the broker's default.replication.factor)")
	var cfgs stringList
	fs.Var(&cfgs, "config", "topic config key=value (repeatable)")
	fs.Var(addConfigList{&cfgs}, "add-config", "k=v,k2=[a,b] (kafka-configs.sh's form of --config)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf(topicUsage, "topic create takes one topic name, got %d", len(pos))
	}
	if *partitions == 0 || *partitions < -1 || *rf == 0 || *rf < -1 || *rf > 32767 {
		return usageErrorf(topicUsage, "--partitions and --replication-factor must be positive")
	}
	kv, _, err := parseKV(topicUsage, cfgs)
	if err != nil {
		return err
	}
	configs := map[string]*string{}
	for k, v := range kv {
		configs[k] = kadm.StringPtr(v)
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		resps, err := adm.CreateTopics(ctx, int32(*partitions), int16(*rf), configs, pos[0])
		if err != nil {
			return err
		}
		r, err := resps.On(pos[0], nil)
		if err != nil {
			return err
		}
		if r.Err != nil {
			return fmt.Errorf("creating topic %s: %s", pos[0], kafkaErr(r.Err, r.ErrMessage))
		}
		out := struct {
			Topic             string `json:"topic"`
			ID                string `json:"id,omitempty"`
			Partitions        int32  `json:"partitions"`
			ReplicationFactor int16  `json:"replication_factor"`
		}{r.Topic, topicID(r.ID), r.NumPartitions, r.ReplicationFactor}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Created topic %s (%d partitions, replication factor %d).\n", r.Topic, r.NumPartitions, r.ReplicationFactor)
		})
	})
}

func (c *cli) topicList(args []string) error {
	fs, o := c.newFlags("topic list", topicUsage)
	internal := fs.Bool("internal", false, "include internal topics (__consumer_offsets)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(topicUsage, "topic list takes no arguments")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		var tds kadm.TopicDetails
		if *internal {
			tds, err = adm.ListTopicsWithInternal(ctx)
		} else {
			tds, err = adm.ListTopics(ctx)
		}
		if err != nil {
			return err
		}
		out := struct {
			Topics []topicInfo `json:"topics"`
		}{Topics: []topicInfo{}}
		for _, d := range tds.Sorted() {
			out.Topics = append(out.Topics, newTopicInfo(d))
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "TOPIC\tPARTITIONS\tREPLICATION-FACTOR\tID")
			for _, t := range out.Topics {
				fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", t.Name, t.PartitionCount, t.ReplicationFactor, t.ID)
			}
		})
	})
}

func (c *cli) topicDescribe(args []string) error {
	fs, o := c.newFlags("topic describe", topicUsage)
	o.posFlag(fs, "topic")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(topicUsage, "topic describe takes one or more topic names")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		tds, err := requireTopics(ctx, adm, pos...)
		if err != nil {
			return err
		}
		cfgs, err := nonDefaultTopicConfigs(ctx, adm, pos...)
		if err != nil {
			return err
		}
		elrs := describeELR(ctx, cl, pos)
		out := struct {
			Topics []topicInfo `json:"topics"`
		}{}
		for _, name := range pos {
			d := tds[name]
			ti := newTopicInfo(d)
			ti.Configs = cfgs[name]
			for _, p := range d.Partitions.Sorted() {
				pi := newPartitionInfo(p)
				if e, ok := elrs[name][p.Partition]; ok {
					pi.ELR, pi.LastKnownELR = e[0], e[1]
				}
				ti.Partitions = append(ti.Partitions, pi)
			}
			out.Topics = append(out.Topics, ti)
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			for i, t := range out.Topics {
				if i > 0 {
					fmt.Fprintln(w)
				}
				var kvs []string
				for _, k := range sortedKeys(t.Configs) {
					kvs = append(kvs, k+"="+t.Configs[k])
				}
				fmt.Fprintf(w, "Topic: %s  TopicId: %s  PartitionCount: %d  ReplicationFactor: %d  Configs: %s\n",
					t.Name, t.ID, t.PartitionCount, t.ReplicationFactor, strings.Join(kvs, ","))
				fmt.Fprintln(w, "PARTITION\tLEADER\tREPLICAS\tISR\tELR\tLAST-KNOWN-ELR\tOFFLINE")
				for _, p := range t.Partitions {
					fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, ints(p.Replicas), ints(p.ISR), ints(p.ELR), ints(p.LastKnownELR), ints(p.OfflineReplicas))
				}
			}
		})
	})
}

// describeELR asks DescribeTopicPartitions (API 75, as kafka-topics.sh
// --describe does since Kafka 3.8) for the topics' eligible leader
// replicas and last known ELR, by topic and partition, following its
// cursor. A broker without the API (or any failure) gives none: the
// columns stay empty.
func describeELR(ctx context.Context, cl *kgo.Client, topics []string) map[string]map[int32][2][]int32 {
	out := map[string]map[int32][2][]int32{}
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return out
		}
		for _, t := range resp.Topics {
			if t.Topic == nil || t.ErrorCode != 0 {
				continue
			}
			if out[*t.Topic] == nil {
				out[*t.Topic] = map[int32][2][]int32{}
			}
			for _, p := range t.Partitions {
				out[*t.Topic][p.Partition] = [2][]int32{p.EligibleLeaderReplicas, p.LastKnownELR}
			}
		}
		if resp.NextCursor == nil {
			return out
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
}

// nonDefaultTopicConfigs returns, per topic, the configs that are not at
// Kafka's default: set on the topic (DYNAMIC_TOPIC_CONFIG, what
// kafka-topics --describe lists as "Configs") or through the broker's
// server.properties (STATIC_BROKER_CONFIG). Sensitive values are shown as
// "[hidden]".
func nonDefaultTopicConfigs(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]map[string]string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, topicErr(rc.Name, rc.Err, rc.ErrMessage)
		}
		m := map[string]string{}
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDefaultConfig {
				continue
			}
			m[c.Key] = configValue(c)
		}
		out[rc.Name] = m
	}
	return out, nil
}

// configValue is a config's value as printed: "[hidden]" when sensitive,
// "null" when unset.
func configValue(c kadm.Config) string {
	switch {
	case c.Sensitive:
		return "[hidden]"
	case c.Value == nil:
		return "null"
	default:
		return *c.Value
	}
}

func (c *cli) topicAlter(args []string) error {
	fs, o := c.newFlags("topic alter", topicUsage)
	o.posFlag(fs, "topic")
	var set, del stringList
	fs.Var(&set, "config", "set a topic config key=value (repeatable)")
	fs.Var(addConfigList{&set}, "add-config", "k=v,k2=[a,b] (kafka-configs.sh's form of --config)")
	fs.Var(commaList{&del}, "delete-config", "remove topic config overrides k[,k2], back to the default (repeatable)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf(topicUsage, "topic alter takes one topic name, got %d", len(pos))
	}
	if len(set)+len(del) == 0 {
		return usageErrorf(topicUsage, "topic alter needs --config k=v or --delete-config k")
	}
	kv, order, err := parseKV(topicUsage, set)
	if err != nil {
		return err
	}
	var alters []kadm.AlterConfig
	for _, k := range order {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(kv[k])})
	}
	for _, k := range del {
		if _, both := kv[k]; both {
			return usageErrorf(topicUsage, "config %s is both set and deleted", k)
		}
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return alterTopicConfigs(o, pos[0], alters)
}

// alterTopicConfigs runs an IncrementalAlterConfigs on one topic (topic
// alter, config set) and prints what changed.
func alterTopicConfigs(o *adminOpts, topic string, alters []kadm.AlterConfig) error {
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if _, err := requireTopics(ctx, adm, topic); err != nil {
			return err
		}
		resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
		if err != nil {
			return err
		}
		r, err := resps.On(topic, nil)
		if err != nil {
			return err
		}
		if r.Err != nil {
			return topicErr(topic, r.Err, r.ErrMessage)
		}
		out := struct {
			Topic   string            `json:"topic"`
			Set     map[string]string `json:"set,omitempty"`
			Deleted []string          `json:"deleted,omitempty"`
		}{Topic: topic}
		out.Set, out.Deleted = splitAlters(alters)
		return o.emit(out, func(w *tabwriter.Writer) {
			for _, k := range sortedKeys(out.Set) {
				fmt.Fprintf(w, "Set %s=%s on topic %s.\n", k, out.Set[k], topic)
			}
			for _, k := range out.Deleted {
				fmt.Fprintf(w, "Deleted %s on topic %s (back to its default).\n", k, topic)
			}
		})
	})
}

func (c *cli) topicAddPartitions(args []string) error {
	fs, o := c.newFlags("topic add-partitions", topicUsage)
	o.posFlag(fs, "topic")
	count := fs.Int("count", 0, "the new total number of partitions")
	fs.IntVar(count, "partitions", 0, "--count (kafka-topics.sh --alter --partitions)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf(topicUsage, "topic add-partitions takes one topic name, got %d", len(pos))
	}
	if *count <= 0 {
		return usageErrorf(topicUsage, "topic add-partitions needs --count N (the new total number of partitions)")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		tds, err := requireTopics(ctx, adm, pos[0])
		if err != nil {
			return err
		}
		before := len(tds[pos[0]].Partitions)
		if *count <= before {
			return fmt.Errorf("topic %s has %d partitions: --count must be larger (partitions cannot be removed)", pos[0], before)
		}
		resps, err := adm.UpdatePartitions(ctx, *count, pos[0])
		if err != nil {
			return err
		}
		r, err := resps.On(pos[0], nil)
		if err != nil {
			return err
		}
		if r.Err != nil {
			return topicErr(pos[0], r.Err, r.ErrMessage)
		}
		out := struct {
			Topic  string `json:"topic"`
			Before int    `json:"partitions_before"`
			After  int    `json:"partitions"`
		}{pos[0], before, *count}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Topic %s now has %d partitions (was %d).\n", pos[0], *count, before)
		})
	})
}

func (c *cli) topicDelete(args []string) error {
	fs, o := c.newFlags("topic delete", topicUsage)
	o.posFlag(fs, "topic")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(topicUsage, "topic delete takes one or more topic names")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		resps, err := adm.DeleteTopics(ctx, pos...)
		if err != nil {
			return err
		}
		type result struct {
			Topic string `json:"topic"`
			Error string `json:"error,omitempty"`
		}
		out := struct {
			Deleted []result `json:"topics"`
		}{}
		var errs []error
		for _, t := range pos {
			r, err := resps.On(t, nil)
			if err == nil && r.Err != nil {
				err = topicErr(t, r.Err, r.ErrMessage)
			} else if err != nil {
				err = topicErr(t, err, "")
			}
			res := result{Topic: t}
			if err != nil {
				res.Error = err.Error()
				errs = append(errs, err)
			}
			out.Deleted = append(out.Deleted, res)
		}
		if err := o.emit(out, func(w *tabwriter.Writer) {
			for _, r := range out.Deleted {
				if r.Error == "" {
					fmt.Fprintf(w, "Deleted topic %s.\n", r.Topic)
				}
			}
		}); err != nil {
			return err
		}
		return joinErrs(errs)
	})
}
