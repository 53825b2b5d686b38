package admin

// sluice elect (Kafka's kafka-leader-election.sh, ElectLeaders) and sluice
// reassign (kafka-reassign-partitions.sh: --generate, --execute, --verify
// / --list, --cancel, on AlterPartitionAssignments and
// ListPartitionReassignments). A cluster whose brokers do not list the API
// in ApiVersions (or answer UNSUPPORTED_VERSION) gets "this broker does not
// serve X yet" and exit status 1; nothing is faked.

import (
	"context"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kgo"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka API keys checked in ApiVersions.
const (
	apiElectLeaders               = 43
	apiAlterPartitionAssignments  = 45
	apiListPartitionReassignments = 46
)

// electUsage is the usage text of `sluice elect`.
const electUsage = `usage:
  sluice elect --topic T [--partition P] [--type preferred|unclean]
  sluice elect --all-topic-partitions [--type preferred|unclean]

Asks the controller to elect leaders (ElectLeaders): preferred moves
leadership back to each partition's first replica; unclean elects any live
replica of a partition that has no in-sync one (data may be lost).
--all-topic-partitions asks for every partition of the cluster
(kafka-leader-election.sh); the answer lists those that needed an election.
--election-type PREFERRED|UNCLEAN (kafka-leader-election.sh's name) is the
same as --type.
`

// reassignUsage is the usage text of `sluice reassign`.
const reassignUsage = `usage:
  sluice reassign plan --brokers 1,2,3 --topics a,b [--replication-factor N]
  sluice reassign execute FILE
  sluice reassign status [--topics a,b]
  sluice reassign cancel FILE

plan prints Kafka's reassignment JSON ({"version":1,"partitions":[...]}):
every replica of the topics on the brokers given, replicas and preferred
leaders balanced within one per broker (a per-broker summary goes to
standard error). execute submits such a file (AlterPartitionAssignments),
status lists the reassignments in progress, cancel cancels the file's.
`

// notServed is the error for an API the cluster does not serve.
func notServed(api string) error {
	return fmt.Errorf("this broker does not serve %s yet", api)
}

// requireAPI fails with notServed unless some broker lists key in its
// ApiVersions.
func requireAPI(ctx context.Context, adm *kadm.Client, key int16, api string) error {
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range vs {
		if v.Err != nil {
			errs = append(errs, v.Err)
			continue
		}
		if _, ok := v.KeyMaxVersion(key); ok {
			return nil
		}
	}
	if len(errs) == len(vs) && len(errs) > 0 {
		return fmt.Errorf("ApiVersions: %v", errors.Join(errs...))
	}
	return notServed(api)
}

// apiErr maps a request error: UNSUPPORTED_VERSION (or franz-go's
// "broker is too old") is notServed.
func apiErr(err error, api string) error {
	if errors.Is(err, kerr.UnsupportedVersion) || strings.Contains(err.Error(), "broker is too old") {
		return notServed(api)
	}
	return err
}

func (c *cli) electCmd(args []string) error {
	fs, o := c.newFlags("elect", electUsage)
	topic := fs.String("topic", "", "topic whose leaders to elect")
	partition := fs.Int("partition", -1, "only this partition")
	typ := fs.String("type", "preferred", "preferred or unclean")
	fs.StringVar(typ, "election-type", "preferred", "--type (kafka-leader-election.sh's name)")
	all := fs.Bool("all-topic-partitions", false, "every partition of every topic")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || (*topic == "") == !*all {
		return usageErrorf(electUsage, "elect needs --topic or --all-topic-partitions (one of them), and no arguments")
	}
	if *all && *partition >= 0 {
		return usageErrorf(electUsage, "--partition needs --topic, not --all-topic-partitions")
	}
	how := kadm.ElectPreferredReplica
	*typ = strings.ToLower(*typ) // kafka-leader-election.sh: PREFERRED, UNCLEAN
	switch *typ {
	case "preferred":
	case "unclean":
		how = kadm.ElectLiveReplica
	default:
		return usageErrorf(electUsage, "invalid value %q for --type: expected preferred or unclean", *typ)
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if err := requireAPI(ctx, adm, apiElectLeaders, "ElectLeaders"); err != nil {
			return err
		}
		// --all-topic-partitions: a null topic list, every partition
		// (kafka-leader-election.sh; the controller answers for those it
		// elected or could not).
		var set kadm.TopicsSet
		if *all {
			set = nil
		} else if tds, err := requireTopics(ctx, adm, *topic); err != nil {
			return err
		} else if *partition >= 0 {
			if _, ok := tds[*topic].Partitions[int32(*partition)]; !ok {
				return fmt.Errorf("topic %s has no partition %d", *topic, *partition)
			}
			set = kadm.TopicsSet{}
			set.Add(*topic, int32(*partition))
		} else {
			set = kadm.TopicsSet{}
			set.Add(*topic, tds[*topic].Partitions.Numbers()...)
		}
		res, err := adm.ElectLeaders(ctx, how, set)
		if err != nil {
			return apiErr(err, "ElectLeaders")
		}
		type result struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Result    string `json:"result"`
		}
		out := struct {
			Type    string   `json:"type"`
			Results []result `json:"results"`
		}{Type: *typ}
		out.Results = []result{}
		var errs []error
		for _, t := range sortedKeys(res) {
			ps := res[t]
			for _, p := range slices.Sorted(mapKeys(ps)) {
				r := ps[p]
				msg := "elected"
				switch {
				case errors.Is(r.Err, kerr.ElectionNotNeeded):
					msg = "already led by the elected replica"
				case errors.Is(r.Err, kerr.UnsupportedVersion):
					return notServed("ElectLeaders")
				case r.Err != nil:
					msg = kafkaErr(r.Err, r.ErrMessage)
					errs = append(errs, fmt.Errorf("%s-%d: %s", t, p, msg))
				}
				out.Results = append(out.Results, result{t, p, msg})
			}
		}
		if err := o.emit(out, func(w *tabwriter.Writer) {
			if len(out.Results) == 0 {
				fmt.Fprintln(w, "No partition needed an election.")
				return
			}
			fmt.Fprintln(w, "TOPIC\tPARTITION\tRESULT")
			for _, r := range out.Results {
				fmt.Fprintf(w, "%s\t%d\t%s\n", r.Topic, r.Partition, r.Result)
			}
		}); err != nil {
			return err
		}
		return joinErrs(errs)
	})
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (c *cli) reassignCmd(args []string) error {
	return c.subcommand("reassign", reassignUsage, args, map[string]func([]string) error{
		"plan":    c.reassignPlan,
		"execute": func(a []string) error { return c.reassignSubmit(a, false) },
		"status":  c.reassignStatus,
		"cancel":  func(a []string) error { return c.reassignSubmit(a, true) },
	})
}

func (c *cli) reassignPlan(args []string) error {
	fs, o := c.newFlags("reassign plan", reassignUsage)
	brokerList := fs.String("brokers", "", "broker ids to place the replicas on (1,2,3)")
	topicList := fs.String("topics", "", "topics to place (a,b)")
	rf := fs.Int("replication-factor", 0, "replicas per partition (default: each topic's current one)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	brokers, berr := parseInt32List(*brokerList)
	topics := splitList(*topicList)
	if len(pos) != 0 || berr != nil || len(brokers) == 0 || len(topics) == 0 || *rf < 0 {
		return usageErrorf(reassignUsage, "reassign plan needs --brokers 1,2,3 and --topics a,b")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		md, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		for _, b := range brokers {
			if !slices.Contains(md.Brokers.NodeIDs(), b) {
				return fmt.Errorf("broker %d is not in the cluster (brokers: %s)", b, ints(md.Brokers.NodeIDs()))
			}
		}
		tds, err := requireTopics(ctx, adm, topics...)
		if err != nil {
			return err
		}
		var pts []planTopic
		for _, t := range topics {
			r := *rf
			if r == 0 {
				r = tds[t].Partitions.NumReplicas()
			}
			pts = append(pts, planTopic{Name: t, Partitions: len(tds[t].Partitions), RF: r})
		}
		plan, err := planAssignment(pts, brokers)
		if err != nil {
			return err
		}
		if !o.json {
			replicas, leaders := map[int32]int{}, map[int32]int{}
			for _, p := range plan {
				leaders[p.Replicas[0]]++
				for _, b := range p.Replicas {
					replicas[b]++
				}
			}
			tw := tabwriter.NewWriter(o.stderr, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "BROKER\tREPLICAS\tLEADERS")
			sorted := slices.Clone(brokers)
			slices.Sort(sorted)
			for _, b := range sorted {
				fmt.Fprintf(tw, "%d\t%d\t%d\n", b, replicas[b], leaders[b])
			}
			tw.Flush()
		}
		o.json = true // the plan is JSON in either mode: save it to a file
		return o.emit(reassignDoc{Version: 1, Partitions: plan}, nil)
	})
}

// reassignSubmit is `reassign execute FILE` and `reassign cancel FILE`.
func (c *cli) reassignSubmit(args []string, cancelIt bool) error {
	fs, o := c.newFlags("reassign execute", reassignUsage)
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf(reassignUsage, "reassign execute and cancel take one reassignment JSON file ('-' for standard input)")
	}
	var data []byte
	if pos[0] == "-" {
		data, err = io.ReadAll(o.stdin)
	} else {
		data, err = os.ReadFile(pos[0])
	}
	if err != nil {
		return err
	}
	doc, err := parseReassignment(data)
	if err != nil {
		return fmt.Errorf("%s: %v", pos[0], err)
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if err := requireAPI(ctx, adm, apiAlterPartitionAssignments, "AlterPartitionAssignments"); err != nil {
			return err
		}
		var topics []string
		for _, p := range doc.Partitions {
			if !slices.Contains(topics, p.Topic) {
				topics = append(topics, p.Topic)
			}
		}
		if _, err := requireTopics(ctx, adm, topics...); err != nil {
			return err
		}
		var req kadm.AlterPartitionAssignmentsReq
		for _, p := range doc.Partitions {
			if cancelIt {
				req.CancelAssign(p.Topic, p.Partition)
			} else {
				req.Assign(p.Topic, p.Partition, p.Replicas)
			}
		}
		resps, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			return apiErr(err, "AlterPartitionAssignments")
		}
		type result struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Error     string `json:"error,omitempty"`
		}
		verb := "reassignment started"
		if cancelIt {
			verb = "reassignment cancelled"
		}
		out := struct {
			Results []result `json:"results"`
		}{}
		var errs []error
		for _, r := range resps.Sorted() {
			res := result{Topic: r.Topic, Partition: r.Partition}
			if r.Err != nil {
				res.Error = kafkaErr(r.Err, r.ErrMessage)
				errs = append(errs, fmt.Errorf("%s-%d: %s", r.Topic, r.Partition, res.Error))
			}
			out.Results = append(out.Results, res)
		}
		if err := o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "TOPIC\tPARTITION\tRESULT")
			for _, r := range out.Results {
				res := verb
				if r.Error != "" {
					res = r.Error
				}
				fmt.Fprintf(w, "%s\t%d\t%s\n", r.Topic, r.Partition, res)
			}
		}); err != nil {
			return err
		}
		return joinErrs(errs)
	})
}

func (c *cli) reassignStatus(args []string) error {
	fs, o := c.newFlags("reassign status", reassignUsage)
	topicList := fs.String("topics", "", "only these topics (a,b)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(reassignUsage, "reassign status takes no arguments")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if err := requireAPI(ctx, adm, apiListPartitionReassignments, "ListPartitionReassignments"); err != nil {
			return err
		}
		var set kadm.TopicsSet
		if topics := splitList(*topicList); len(topics) > 0 {
			tds, err := requireTopics(ctx, adm, topics...)
			if err != nil {
				return err
			}
			for _, t := range topics {
				set.Add(t, tds[t].Partitions.Numbers()...)
			}
		} else {
			// kadm sends no request for an empty set: name every topic.
			tds, err := adm.ListTopics(ctx)
			if err != nil {
				return apiErr(err, "Metadata")
			}
			for _, td := range tds.Sorted() {
				set.Add(td.Topic, td.Partitions.Numbers()...)
			}
		}
		resps, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			return apiErr(err, "ListPartitionReassignments")
		}
		type status struct {
			Topic     string  `json:"topic"`
			Partition int32   `json:"partition"`
			Replicas  []int32 `json:"replicas"`
			Adding    []int32 `json:"adding"`
			Removing  []int32 `json:"removing"`
		}
		out := struct {
			InProgress []status `json:"in_progress"`
		}{InProgress: []status{}}
		for _, r := range resps.Sorted() {
			out.InProgress = append(out.InProgress, status{r.Topic, r.Partition, nonNil(r.Replicas), nonNil(r.AddingReplicas), nonNil(r.RemovingReplicas)})
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			if len(out.InProgress) == 0 {
				fmt.Fprintln(w, "No reassignment in progress.")
				return
			}
			fmt.Fprintln(w, "TOPIC\tPARTITION\tREPLICAS\tADDING\tREMOVING")
			for _, s := range out.InProgress {
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", s.Topic, s.Partition, ints(s.Replicas), dash(ints(s.Adding)), dash(ints(s.Removing)))
			}
		})
	})
}
