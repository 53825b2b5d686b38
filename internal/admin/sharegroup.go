package admin

// sluice share-group: Kafka's kafka-share-groups.sh --list and --describe
// (--members, --state) for share groups (KIP-932), through kadm.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// shareGroupUsage is the usage text of `sluice share-group`.
const shareGroupUsage = `usage:
  sluice share-group list
  sluice share-group describe ID...

list prints each share group with its state and coordinator. describe
prints each group's state, group epoch, assignment epoch and assignor, then
its members (kafka-share-groups.sh --describe --members): member id, client
id, host, member epoch and assigned partitions. The group ids may also be
given as --group ID.

` + shareResetUsage

func (c *cli) shareGroupCmd(args []string) error {
	return c.subcommand("share-group", shareGroupUsage, args, map[string]func([]string) error{
		"list":          c.shareGroupList,
		"describe":      c.shareGroupDescribe,
		"reset-offsets": c.shareGroupResetOffsets,
	})
}

func (c *cli) shareGroupList(args []string) error {
	fs, o := c.newFlags("share-group list", shareGroupUsage)
	return runAdmin(fs, o, args, noArgs(shareGroupUsage, "share-group list"), func(ctx context.Context, adm *kadm.Client, _ []string) error {
		lgs, err := adm.ListGroupsByType(ctx, []string{"share"})
		if err != nil {
			return err
		}
		type group struct {
			Group       string `json:"group"`
			State       string `json:"state"`
			Coordinator int32  `json:"coordinator"`
		}
		out := struct {
			Groups []group `json:"groups"`
		}{Groups: []group{}}
		for _, g := range lgs.Sorted() {
			out.Groups = append(out.Groups, group{g.Group, g.State, g.Coordinator})
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintln(w, "GROUP\tSTATE\tCOORDINATOR")
			for _, g := range out.Groups {
				fmt.Fprintf(w, "%s\t%s\t%d\n", g.Group, g.State, g.Coordinator)
			}
		})
	})
}

// shareMember is a share-group member in `share-group describe`.
type shareMember struct {
	MemberID    string       `json:"member_id"`
	ClientID    string       `json:"client_id"`
	Host        string       `json:"host"`
	Rack        string       `json:"rack,omitempty"`
	MemberEpoch int32        `json:"member_epoch"`
	Subscribed  []string     `json:"subscribed_topics"`
	Assignments []assignment `json:"assignments"`
}

// shareGroupInfo is one group in `share-group describe`.
type shareGroupInfo struct {
	Group           string        `json:"group"`
	State           string        `json:"state"`
	GroupEpoch      int32         `json:"group_epoch"`
	AssignmentEpoch int32         `json:"assignment_epoch"`
	Assignor        string        `json:"assignor"`
	Coordinator     int32         `json:"coordinator"`
	Members         []shareMember `json:"members"`
	Error           string        `json:"error,omitempty"`
}

func (c *cli) shareGroupDescribe(args []string) error {
	fs, o := c.newFlags("share-group describe", shareGroupUsage)
	o.posFlag(fs, "group")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf(shareGroupUsage, "share-group describe takes one or more group ids")
	}
	return o.run(func(ctx context.Context, _ *kgo.Client, adm *kadm.Client) error {
		described, err := adm.DescribeShareGroups(ctx, pos...)
		if err != nil && len(described) == 0 {
			return err
		}
		out := struct {
			Groups []shareGroupInfo `json:"groups"`
		}{Groups: []shareGroupInfo{}}
		var failed []string
		for _, id := range pos {
			d, ok := described[id]
			g := shareGroupInfo{Group: id, Members: []shareMember{}}
			switch {
			case !ok:
				g.Error = "not described"
			case d.Err != nil:
				g.Error = d.Err.Error()
			default:
				g.State, g.GroupEpoch, g.AssignmentEpoch, g.Assignor = d.GroupState, d.GroupEpoch, d.AssignmentEpoch, d.Assignor
				g.Coordinator = d.Coordinator.NodeID
				for _, m := range d.Members {
					sm := shareMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, MemberEpoch: m.MemberEpoch,
						Subscribed: slices.Sorted(slices.Values(m.SubscribedTopicNames)), Assignments: topicsSet(m.Assignment)}
					if m.RackID != nil {
						sm.Rack = *m.RackID
					}
					if sm.Subscribed == nil {
						sm.Subscribed = []string{}
					}
					g.Members = append(g.Members, sm)
				}
			}
			if g.Error != "" {
				failed = append(failed, id+": "+g.Error)
			}
			out.Groups = append(out.Groups, g)
		}
		if err := o.emit(out, func(w *tabwriter.Writer) {
			for i, g := range out.Groups {
				if i > 0 {
					fmt.Fprintln(w)
				}
				if g.Error != "" {
					fmt.Fprintf(w, "GROUP %s\tERROR %s\n", g.Group, g.Error)
					continue
				}
				fmt.Fprintln(w, "GROUP\tSTATE\tGROUP-EPOCH\tASSIGNMENT-EPOCH\tASSIGNOR\tCOORDINATOR\t#MEMBERS")
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%d\t%d\n", g.Group, g.State, g.GroupEpoch, g.AssignmentEpoch, g.Assignor, g.Coordinator, len(g.Members))
				if len(g.Members) == 0 {
					continue
				}
				fmt.Fprintln(w, "MEMBER-ID\tCLIENT-ID\tHOST\tMEMBER-EPOCH\t#PARTITIONS\tASSIGNMENT")
				for _, m := range g.Members {
					n := 0
					for _, a := range m.Assignments {
						n += len(a.Partitions)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", m.MemberID, m.ClientID, m.Host, m.MemberEpoch, n, assignmentString(m.Assignments))
				}
			}
		}); err != nil {
			return err
		}
		if len(failed) > 0 {
			return fmt.Errorf("share-group describe: %s", strings.Join(failed, "; "))
		}
		return nil
	})
}
