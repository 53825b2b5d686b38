package admin

// sluice share-group reset-offsets: kafka-share-groups.sh --reset-offsets,
// the start offsets of an empty share group's share partitions set with
// AlterShareGroupOffsets (KIP-932; the broker refuses a group with members,
// NON_EMPTY_GROUP).

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// shareResetUsage is the usage text of `sluice share-group reset-offsets`.
const shareResetUsage = `usage:
  sluice share-group reset-offsets ID --topic T[:P,P...] (--to-earliest | --to-latest | --to-offset N) [--execute]

reset-offsets sets the share-partition start offsets of share group ID:
every record before the new start offset counts as delivered, every
record from it on is delivered again. It prints the new offsets (a dry
run) unless --execute is given; the group must have no members (the broker
answers NON_EMPTY_GROUP). --topic may be repeated and may name partitions
(orders:0,2); new offsets are kept between the log start and end offsets.
The group id may also be given as --group ID.
`

// shareResetPlan is one partition's offsets in `share-group reset-offsets`.
type shareResetPlan struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"current_start_offset"`
	New       int64  `json:"new_start_offset"`
}

func (c *cli) shareGroupResetOffsets(args []string) error {
	fs, o := c.newFlags("share-group reset-offsets", shareResetUsage)
	o.posFlag(fs, "group")
	var topics stringList
	fs.Var(&topics, "topic", "topic (TOPIC or TOPIC:P,P,...) whose start offsets to reset (repeatable)")
	earliest := fs.Bool("to-earliest", false, "reset to the log start offset")
	latest := fs.Bool("to-latest", false, "reset to the log end offset")
	toOffset := fs.Int64("to-offset", -1, "reset to this offset")
	execute := fs.Bool("execute", false, "set the new start offsets (without it: a dry run)")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf(shareResetUsage, "share-group reset-offsets takes one group id, got %d", len(pos))
	}
	group := pos[0]
	scenarios := 0
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "to-earliest", "to-latest", "to-offset":
			scenarios++
		}
	})
	if scenarios != 1 {
		return usageErrorf(shareResetUsage, "share-group reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset N")
	}
	if len(topics) == 0 {
		return usageErrorf(shareResetUsage, "share-group reset-offsets needs --topic")
	}
	wanted := map[string][]int32{}
	var names []string
	for _, spec := range topics {
		t, ps, err := topicPartitions(spec)
		if err != nil {
			return usageErrorf(shareResetUsage, "%v", err)
		}
		if _, dup := wanted[t]; !dup {
			names = append(names, t)
		}
		wanted[t] = append(wanted[t], ps...)
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
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
		described, err := adm.DescribeShareGroupOffsets(ctx, group)
		if err != nil {
			return fmt.Errorf("describing the start offsets of share group %s: %v", group, err)
		}
		current := described[group].Offsets
		var plan []shareResetPlan
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
					return fmt.Errorf("listing the offsets of %s-%d: %v %v", t, p, so.Err, eo.Err)
				}
				cur := int64(-1)
				if sh, ok := current.Lookup(t, p); ok && sh.Err == nil {
					cur = sh.StartOffset
				}
				target := *toOffset
				switch {
				case *earliest:
					target = so.Offset
				case *latest:
					target = eo.Offset
				}
				if target < so.Offset || target > eo.Offset {
					clamped := min(max(target, so.Offset), eo.Offset)
					warnings = append(warnings, fmt.Sprintf("new start offset %d of %s-%d is outside [%d, %d]: using %d", target, t, p, so.Offset, eo.Offset, clamped))
					target = clamped
				}
				plan = append(plan, shareResetPlan{Topic: t, Partition: p, Current: cur, New: target})
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
			resps, err := adm.AlterShareGroupOffsets(ctx, group, offs)
			if err == nil {
				err = resps.Error()
			}
			if err != nil {
				return fmt.Errorf("setting the start offsets of share group %s: %v", group, err)
			}
		}
		out := struct {
			Group      string           `json:"group"`
			Executed   bool             `json:"executed"`
			Partitions []shareResetPlan `json:"partitions"`
		}{group, *execute, plan}
		err = o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCURRENT-START-OFFSET\tNEW-START-OFFSET")
			for _, r := range plan {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\n", group, r.Topic, r.Partition, orDash(r.Current), r.New)
			}
		})
		if err == nil && !*execute && !o.json {
			fmt.Fprintln(o.stderr, "Dry run: nothing was set. Run again with --execute to set these start offsets.")
		}
		return err
	})
}
