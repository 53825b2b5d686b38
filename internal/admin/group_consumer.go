package admin

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// addConsumerGroup fills g, a KIP-848 consumer group, from
// ConsumerGroupDescribe: its type, group and assignment epochs, assignor,
// and each member's epoch and target assignment. A classic group (of
// protocol type consumer) answers GROUP_ID_NOT_FOUND and stays as it is,
// as does a group on a broker without ConsumerGroupDescribe.
func addConsumerGroup(ctx context.Context, adm *kadm.Client, g *groupInfo) {
	described, err := adm.DescribeConsumerGroups(ctx, g.Group)
	if err != nil {
		return
	}
	d, ok := described[g.Group]
	if !ok || d.Err != nil {
		return
	}
	g.Type, g.State = "consumer", d.State
	g.GroupEpoch, g.AssignmentEpoch, g.Assignor = d.Epoch, d.AssignmentEpoch, d.AssignorName
	byID := map[string]kadm.ConsumerGroupMember{}
	for _, m := range d.Members {
		byID[m.MemberID] = m
	}
	for i := range g.Members {
		m, ok := byID[g.Members[i].MemberID]
		if !ok {
			continue
		}
		epoch := m.MemberEpoch
		g.Members[i].MemberEpoch = &epoch
		g.Members[i].Assignments = topicsSet(m.Assignment)
		g.Members[i].Target = topicsSet(m.TargetAssignment)
	}
}

// topicsSet lists s by topic, partitions sorted.
func topicsSet(s kadm.TopicsSet) []assignment {
	out := []assignment{}
	for _, t := range s.Sorted() {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		out = append(out, assignment{t.Topic, ps})
	}
	slices.SortFunc(out, func(a, b assignment) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

// assignmentString is "topic:0,1 other:2".
func assignmentString(as []assignment) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, a.Topic+":"+ints(a.Partitions))
	}
	return strings.Join(parts, " ")
}
