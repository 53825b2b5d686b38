package admin

// sluice group: Kafka's kafka-consumer-groups.sh (--list, --describe,
// --reset-offsets, --delete) for classic consumer groups, through kadm.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/twmb/franz-go/pkg/kgo"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// groupUsage is the usage text of `sluice group`.
const groupUsage = `usage:
  sluice group list
  sluice group describe ID...
  sluice group reset-offsets ID --topic T[:P,P...] (--to-earliest | --to-latest | --to-offset N | --shift-by N) [--execute]
  sluice group delete ID...

describe lists the members and their assignments, and per partition the
committed offset, the log end offset and the lag. reset-offsets prints the
new offsets (a dry run) unless --execute is given; like kafka-consumer-groups
it refuses while the group has active members. --topic may be repeated and
may name partitions (orders:0,2); new offsets are kept between the log start
and end offsets. The group ids may also be given as --group ID (Kafka's
kafka-consumer-groups.sh name).
`

func (c *cli) groupCmd(args []string) error {
	return c.subcommand("group", groupUsage, args, map[string]func([]string) error{
		"list":          c.groupList,
		"describe":      c.groupDescribe,
		"reset-offsets": c.groupResetOffsets,
		"delete":        c.groupDelete,
	})
}

func (c *cli) groupList(args []string) error {
	fs, o := c.newFlags("group list", groupUsage)
	return runAdmin(fs, o, args, noArgs(groupUsage, "group list"), func(ctx context.Context, adm *kadm.Client, _ []string) error {
		return groupListRun(ctx, adm, o)
	})
}

func groupListRun(ctx context.Context, adm *kadm.Client, o *adminOpts) error {
	lgs, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	type group struct {
		Group        string `json:"group"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
		Coordinator  int32  `json:"coordinator"`
	}
	out := struct {
		Groups []group `json:"groups"`
	}{Groups: []group{}}
	for _, g := range lgs.Sorted() {
		out.Groups = append(out.Groups, group{g.Group, g.State, g.ProtocolType, g.Coordinator})
	}
	return o.emit(out, func(w *tabwriter.Writer) {
		fmt.Fprintln(w, "GROUP\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR")
		for _, g := range out.Groups {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", g.Group, g.State, g.ProtocolType, g.Coordinator)
		}
	})
}

// memberInfo is a group member in `group describe`.
type memberInfo struct {
	MemberID    string       `json:"member_id"`
	InstanceID  string       `json:"instance_id,omitempty"`
	ClientID    string       `json:"client_id"`
	Host        string       `json:"host"`
	Assignments []assignment `json:"assignments"`
	// MemberEpoch and Target are a consumer group's (KIP-848): the
	// member's epoch and its partitions in the target assignment.
	MemberEpoch *int32       `json:"member_epoch,omitempty"`
	Target      []assignment `json:"target_assignment,omitempty"`
}

type assignment struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// offsetInfo is one partition's committed offset and lag in `group
// describe` (the columns of kafka-consumer-groups --describe). Committed
// is -1 when the group has no commit for the partition.
type offsetInfo struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed_offset"`
	LogEnd    int64  `json:"log_end_offset"`
	Lag       int64  `json:"lag"`
	MemberID  string `json:"member_id,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Host      string `json:"host,omitempty"`
	Error     string `json:"error,omitempty"`
}

// groupInfo is one group in `group describe`.
type groupInfo struct {
	Group string `json:"group"`
	Type  string `json:"type"` // classic, or consumer (KIP-848)
	State string `json:"state"`
	// GroupEpoch, AssignmentEpoch and Assignor are a consumer group's.
	GroupEpoch      int32        `json:"group_epoch,omitempty"`
	AssignmentEpoch int32        `json:"assignment_epoch,omitempty"`
	Assignor        string       `json:"assignor,omitempty"`
	ProtocolType    string       `json:"protocol_type"`
	Protocol        string       `json:"protocol"`
	Coordinator     int32        `json:"coordinator"`
	Members         []memberInfo `json:"members"`
	Offsets         []offsetInfo `json:"offsets"`
	TotalLag        int64        `json:"total_lag"`
}

func (c *cli) groupDescribe(args []string) error {
	fs, o := c.newFlags("group describe", groupUsage)
	o.posFlag(fs, "group")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(groupUsage, "group describe takes one or more group ids")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		lags, err := adm.Lag(ctx, pos...)
		if err != nil {
			return err
		}
		out := struct {
			Groups []groupInfo `json:"groups"`
		}{}
		for _, id := range pos {
			l, ok := lags[id]
			if !ok {
				return fmt.Errorf("group %s: not in the response", id)
			}
			if err := l.Error(); err != nil {
				return fmt.Errorf("group %s: %v", id, err)
			}
			if l.State == "Dead" && len(l.Members) == 0 && len(l.Lag) == 0 {
				return fmt.Errorf("group %s does not exist", id)
			}
			g := newGroupInfo(l)
			if g.ProtocolType == "consumer" {
				addConsumerGroup(ctx, adm, &g)
			}
			out.Groups = append(out.Groups, g)
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			for i, g := range out.Groups {
				if i > 0 {
					fmt.Fprintln(w)
				}
				fmt.Fprintf(w, "Group: %s  State: %s  Protocol: %s  Coordinator: %d  Members: %d  Lag: %d\n",
					g.Group, g.State, g.Protocol, g.Coordinator, len(g.Members), g.TotalLag)
				if g.Type == "consumer" {
					fmt.Fprintf(w, "Type: consumer  Group epoch: %d  Assignment epoch: %d  Assignor: %s\n", g.GroupEpoch, g.AssignmentEpoch, g.Assignor)
				} else {
					fmt.Fprintln(w, "Type: classic")
				}
				fmt.Fprintln(w, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
				for _, p := range g.Offsets {
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, orDash(p.Committed),
						orDash(p.LogEnd), orDash(p.Lag), dash(p.MemberID), dash(p.Host), dash(p.ClientID))
				}
				if len(g.Members) > 0 && g.Type == "consumer" {
					fmt.Fprintln(w, "\nMEMBER\tEPOCH\tCLIENT-ID\tHOST\tASSIGNMENT\tTARGET")
					for _, m := range g.Members {
						epoch := int32(-1)
						if m.MemberEpoch != nil {
							epoch = *m.MemberEpoch
						}
						fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\n", m.MemberID, epoch, m.ClientID, m.Host,
							dash(assignmentString(m.Assignments)), dash(assignmentString(m.Target)))
					}
				} else if len(g.Members) > 0 {
					fmt.Fprintln(w, "\nMEMBER\tCLIENT-ID\tHOST\tASSIGNMENT")
					for _, m := range g.Members {
						fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, m.Host, dash(assignmentString(m.Assignments)))
					}
				}
			}
		})
	})
}

func orDash(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newGroupInfo(l kadm.DescribedGroupLag) groupInfo {
	g := groupInfo{Group: l.Group, Type: "classic", State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
		Coordinator: l.Coordinator.NodeID, Members: []memberInfo{}, Offsets: []offsetInfo{}}
	for _, m := range l.Members {
		mi := memberInfo{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assignments: []assignment{}}
		if m.InstanceID != nil {
			mi.InstanceID = *m.InstanceID
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				ps := slices.Clone(t.Partitions)
				slices.Sort(ps)
				mi.Assignments = append(mi.Assignments, assignment{t.Topic, ps})
			}
			slices.SortFunc(mi.Assignments, func(a, b assignment) int { return strings.Compare(a.Topic, b.Topic) })
		}
		g.Members = append(g.Members, mi)
	}
	for _, ml := range l.Lag.Sorted() {
		oi := offsetInfo{Topic: ml.Topic, Partition: ml.Partition, Committed: ml.Commit.At, LogEnd: ml.End.Offset, Lag: ml.Lag}
		if ml.End.Err != nil {
			oi.LogEnd = -1
		}
		if ml.Member != nil {
			oi.MemberID, oi.ClientID, oi.Host = ml.Member.MemberID, ml.Member.ClientID, ml.Member.ClientHost
		}
		if ml.Err != nil {
			oi.Error = ml.Err.Error()
		}
		if oi.Lag > 0 {
			g.TotalLag += oi.Lag
		}
		g.Offsets = append(g.Offsets, oi)
	}
	return g
}

// resetPlan is one partition's offsets in `group reset-offsets`.
type resetPlan struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current_offset"`
	New       int64  `json:"new_offset"`
}

// topicPartitions parses --topic T or T:0,1,2.
func topicPartitions(spec string) (string, []int32, error) {
	t, ps, ok := strings.Cut(spec, ":")
	if t == "" {
		return "", nil, fmt.Errorf("invalid --topic %q", spec)
	}
	if !ok {
		return t, nil, nil
	}
	parts, err := parseInt32List(ps)
	if err != nil || len(parts) == 0 {
		return "", nil, fmt.Errorf("invalid --topic %q: expected TOPIC or TOPIC:P,P,...", spec)
	}
	return t, parts, nil
}

func (c *cli) groupResetOffsets(args []string) error {
	fs, o := c.newFlags("group reset-offsets", groupUsage)
	o.posFlag(fs, "group")
	var topics stringList
	fs.Var(&topics, "topic", "topic (TOPIC or TOPIC:P,P,...) whose offsets to reset (repeatable)")
	earliest := fs.Bool("to-earliest", false, "reset to the log start offset")
	latest := fs.Bool("to-latest", false, "reset to the log end offset")
	toOffset := fs.Int64("to-offset", -1, "reset to this offset")
	shiftBy := fs.Int64("shift-by", 0, "move the committed offset by N (negative: back)")
	execute := fs.Bool("execute", false, "commit the new offsets (without it: a dry run)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf(groupUsage, "group reset-offsets takes one group id, got %d", len(pos))
	}
	group := pos[0]
	scenarios := 0
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "to-earliest", "to-latest", "to-offset", "shift-by":
			scenarios++
		}
	})
	if scenarios != 1 {
		return usageErrorf(groupUsage, "group reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset N, --shift-by N")
	}
	if len(topics) == 0 {
		return usageErrorf(groupUsage, "group reset-offsets needs --topic")
	}
	wanted := map[string][]int32{}
	var names []string
	for _, spec := range topics {
		t, ps, err := topicPartitions(spec)
		if err != nil {
			return usageErrorf(groupUsage, "%v", err)
		}
		if _, dup := wanted[t]; !dup {
			names = append(names, t)
		}
		wanted[t] = append(wanted[t], ps...)
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		// Kafka's rule: only an inactive group's offsets can be reset.
		dgs, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return err
		}
		dg := dgs[group]
		if dg.Err != nil {
			return fmt.Errorf("group %s: %s", group, kafkaErr(dg.Err, dg.ErrMessage))
		}
		if dg.State != "Empty" && dg.State != "Dead" {
			return fmt.Errorf("assignments can only be reset if the group %s is inactive, but the current state is %s (%d members): stop its consumers first", group, dg.State, len(dg.Members))
		}
		tds, err := requireTopics(ctx, adm, names...)
		if err != nil {
			return err
		}
		starts, err := adm.ListStartOffsets(ctx, names...)
		if err != nil {
			return err
		}
		ends, err := adm.ListEndOffsets(ctx, names...)
		if err != nil {
			return err
		}
		commits, err := adm.FetchOffsetsForTopics(ctx, group, names...)
		if err != nil {
			return err
		}
		var plan []resetPlan
		var warnings []string
		for _, t := range names {
			parts := wanted[t]
			if len(parts) == 0 {
				parts = tds[t].Partitions.Numbers()
			}
			slices.Sort(parts)
			parts = slices.Compact(parts)
			for _, p := range parts {
				if _, ok := tds[t].Partitions[p]; !ok {
					return fmt.Errorf("topic %s has no partition %d", t, p)
				}
				so, _ := starts.Lookup(t, p)
				eo, _ := ends.Lookup(t, p)
				if so.Err != nil || eo.Err != nil {
					return fmt.Errorf("listing the offsets of %s-%d: %v", t, p, errors.Join(so.Err, eo.Err))
				}
				cur := int64(-1)
				if c, ok := commits.Lookup(t, p); ok && c.Err == nil {
					cur = c.At
				}
				var target int64
				switch {
				case *earliest:
					target = so.Offset
				case *latest:
					target = eo.Offset
				case isSet(fs, "to-offset"):
					target = *toOffset
				default:
					if cur < 0 {
						return fmt.Errorf("cannot shift the offset of %s-%d: the group has no committed offset there", t, p)
					}
					target = cur + *shiftBy
				}
				if target < so.Offset || target > eo.Offset {
					clamped := min(max(target, so.Offset), eo.Offset)
					warnings = append(warnings, fmt.Sprintf("new offset %d of %s-%d is outside [%d, %d]: using %d", target, t, p, so.Offset, eo.Offset, clamped))
					target = clamped
				}
				plan = append(plan, resetPlan{Topic: t, Partition: p, Current: cur, New: target})
			}
		}
		for _, w := range warnings {
			fmt.Fprintln(o.stderr, "warning:", w)
		}
		if *execute {
			var offs kadm.Offsets
			for _, r := range plan {
				offs.AddOffset(r.Topic, r.Partition, r.New, -1)
			}
			resps, err := adm.CommitOffsets(ctx, group, offs)
			if err != nil {
				return fmt.Errorf("committing the offsets of group %s: %v", group, err)
			}
			if err := resps.Error(); err != nil {
				return fmt.Errorf("committing the offsets of group %s: %v", group, err)
			}
		}
		out := struct {
			Group      string      `json:"group"`
			Executed   bool        `json:"executed"`
			Partitions []resetPlan `json:"partitions"`
		}{group, *execute, plan}
		err = o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET")
			for _, r := range plan {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\n", group, r.Topic, r.Partition, orDash(r.Current), r.New)
			}
		})
		if err == nil && !*execute && !o.json {
			fmt.Fprintln(o.stderr, "Dry run: nothing was committed. Run again with --execute to commit these offsets.")
		}
		return err
	})
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

func (c *cli) groupDelete(args []string) error {
	fs, o := c.newFlags("group delete", groupUsage)
	o.posFlag(fs, "group")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(groupUsage, "group delete takes one or more group ids")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		resps, err := adm.DeleteGroups(ctx, pos...)
		if err != nil {
			return err
		}
		type result struct {
			Group string `json:"group"`
			Error string `json:"error,omitempty"`
		}
		out := struct {
			Groups []result `json:"groups"`
		}{}
		var errs []error
		for _, g := range pos {
			r, ok := resps[g]
			var err error
			switch {
			case !ok:
				err = fmt.Errorf("group %s: not in the response", g)
			case errors.Is(r.Err, kerr.GroupIDNotFound):
				err = fmt.Errorf("group %s does not exist", g)
			case errors.Is(r.Err, kerr.NonEmptyGroup):
				err = fmt.Errorf("group %s is not empty: it has active members", g)
			case r.Err != nil:
				err = fmt.Errorf("group %s: %s", g, kafkaErr(r.Err, r.ErrMessage))
			}
			res := result{Group: g}
			if err != nil {
				res.Error = err.Error()
				errs = append(errs, err)
			}
			out.Groups = append(out.Groups, res)
		}
		if err := o.emit(out, func(w *tabwriter.Writer) {
			for _, r := range out.Groups {
				if r.Error == "" {
					fmt.Fprintf(w, "Deleted group %s.\n", r.Group)
				}
			}
		}); err != nil {
			return err
		}
		return joinErrs(errs)
	})
}
