package admin

// sluice cluster decommission and sluice cluster unregister: retiring a
// broker. Kafka has no single tool for it: operators run
// kafka-reassign-partitions.sh to move the replicas away, stop the broker
// and, in KRaft, call Admin.unregisterBroker (UnregisterBroker, API 64,
// KIP-631). decommission computes and executes the reassignment (Kafka's
// reassignment JSON, the same AlterPartitionAssignments request as
// `sluice reassign execute`), and with --wait watches
// ListPartitionReassignments until it is done; unregister sends
// UnregisterBroker (kadm has no helper for it: the request is sent with
// kmsg).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/twmb/franz-go/pkg/kgo"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiUnregisterBroker is UnregisterBroker's Kafka API key.
const apiUnregisterBroker = 64

// decomPartition is a partition's current replicas, input of
// decommissionPlan.
type decomPartition struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// decommissionPlan moves every replica of broker id to the brokers in
// others and nothing else: a partition keeps its other replicas and their
// order, and the replacement takes the retired broker's place. Unlike
// planAssignment (reassign plan), which re-places whole topics, this moves
// only the replicas that must move, with planAssignment's max-flow graph
// (flow): the replacements are a flow from the moved partitions to the
// brokers not already in them, each broker b taking at most T - c_b where
// c_b is what it holds now and T the smallest level at which every
// partition gets a replacement (so the most loaded broker afterwards is as
// little loaded as possible); then single moves from a broker to one
// holding two fewer are made while any exists. Where the retired broker
// was the preferred leader (first replica), the partition's replica with
// the fewest preferred leaderships (counted as the plan goes, partitions
// in topic and partition order) becomes first. A partition with no broker
// left to take the replica (its replication factor is more than the
// brokers left) is an error.
func decommissionPlan(parts []decomPartition, id int32, others []int32) ([]reassignPartition, error) {
	others = slices.Clone(others)
	slices.Sort(others)
	others = slices.Compact(slices.DeleteFunc(others, func(b int32) bool { return b == id }))
	sorted := slices.Clone(parts)
	slices.SortFunc(sorted, func(a, b decomPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	count, leaders := map[int32]int{}, map[int32]int{}
	var moved []decomPartition
	for _, p := range sorted {
		for i, r := range p.Replicas {
			if r == id {
				continue
			}
			count[r]++
			if i == 0 {
				leaders[r]++
			}
		}
		if !slices.Contains(p.Replicas, id) {
			continue
		}
		if !slices.ContainsFunc(others, func(b int32) bool { return !slices.Contains(p.Replicas, b) }) {
			return nil, fmt.Errorf("%s-%d has %d replicas %s: no broker other than %d is left to take its replica (brokers: %s)",
				p.Topic, p.Partition, len(p.Replicas), ints(p.Replicas), id, ints(others))
		}
		moved = append(moved, p)
	}
	if len(moved) == 0 {
		return nil, nil
	}
	total := len(moved)
	for _, b := range others {
		total += count[b]
	}
	choice := make([]int32, len(moved))
	for level := (total + len(others) - 1) / len(others); ; level++ {
		if replaceAtLevel(moved, id, others, count, level, choice) {
			break
		}
	}
	load := map[int32]int{}
	for _, b := range others {
		load[b] = count[b]
	}
	for _, b := range choice {
		load[b]++
	}
	for changed := true; changed; {
		changed = false
		for i, p := range moved {
			for _, b := range others {
				if load[b] <= load[choice[i]]-2 && !slices.Contains(p.Replicas, b) {
					load[choice[i]]--
					load[b]++
					choice[i], changed = b, true
				}
			}
		}
	}
	out := make([]reassignPartition, 0, len(moved))
	for i, p := range moved {
		slot := slices.Index(p.Replicas, id)
		target := slices.Clone(p.Replicas)
		target[slot] = choice[i]
		if slot == 0 {
			lead := 0
			for j, r := range target {
				if leaders[r] < leaders[target[lead]] {
					lead = j
				}
			}
			first := target[lead]
			copy(target[1:lead+1], target[:lead])
			target[0] = first
			leaders[target[0]]++
		}
		out = append(out, reassignPartition{Topic: p.Topic, Partition: p.Partition, Replicas: target})
	}
	return out, nil
}

// replaceAtLevel finds a replacement for id in every moved partition, none
// already in it, no broker b taking more than level - count[b]; the
// replacements go to choice. It reports whether every partition got one.
func replaceAtLevel(moved []decomPartition, id int32, others []int32, count map[int32]int, level int, choice []int32) bool {
	P, n := len(moved), len(others)
	src, sink := 0, 1+P+n
	g := newFlow(2 + P + n)
	edges := make([][]int, P)
	for i, p := range moved {
		g.add(src, 1+i, 1)
		edges[i] = make([]int, n)
		for j, b := range others {
			edges[i][j] = -1
			if !slices.Contains(p.Replicas, b) {
				edges[i][j] = g.add(1+i, 1+P+j, 1)
			}
		}
	}
	for j, b := range others {
		if c := level - count[b]; c > 0 {
			g.add(1+P+j, sink, c)
		}
	}
	if g.maxFlow(src, sink) != P {
		return false
	}
	for i := range moved {
		for j, e := range edges[i] {
			if e >= 0 && g.cap[e] == 0 {
				choice[i] = others[j]
			}
		}
	}
	return true
}

// signalContext is a context cancelled by SIGINT or SIGTERM and bounded
// by d.
func signalContext(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, func() { cancel(); stop() }
}

// parseBrokerFlag checks that --broker was given.
func parseBrokerFlag(fs *flag.FlagSet, usage, cmd string, id int) (int32, error) {
	if !isSet(fs, "broker") || id < 0 {
		return 0, usageErrorf(usage, "%s needs --broker ID", cmd)
	}
	return int32(id), nil
}

func (c *cli) clusterDecommission(args []string) error {
	fs, o := c.newFlags("cluster decommission", clusterUsage)
	id := fs.Int("broker", -1, "the broker to retire")
	wait := fs.Bool("wait", false, "wait until the replicas have moved")
	waitTimeout := fs.Duration("wait-timeout", time.Hour, "bound on --wait")
	dryRun := fs.Bool("dry-run", false, "print the reassignment, do not execute it")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(clusterUsage, "cluster decommission takes no arguments")
	}
	broker, err := parseBrokerFlag(fs, clusterUsage, "cluster decommission", *id)
	if err != nil {
		return err
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		for _, api := range []struct {
			key  int16
			name string
		}{{apiAlterPartitionAssignments, "AlterPartitionAssignments"}, {apiListPartitionReassignments, "ListPartitionReassignments"}} {
			if err := requireAPI(ctx, adm, api.key, api.name); err != nil {
				return err
			}
		}
		md, err := adm.Metadata(ctx) // every topic, internal ones too
		if err != nil {
			return err
		}
		var parts []decomPartition
		all := kadm.TopicsSet{}
		hosted := 0
		for _, td := range md.Topics.Sorted() {
			if td.Err != nil {
				return topicErr(td.Topic, td.Err, "")
			}
			for _, p := range td.Partitions.Sorted() {
				parts = append(parts, decomPartition{td.Topic, p.Partition, p.Replicas})
				all.Add(td.Topic, p.Partition)
				if slices.Contains(p.Replicas, broker) {
					hosted++
				}
			}
		}
		live := md.Brokers.NodeIDs()
		if !slices.Contains(live, broker) && hosted == 0 {
			return fmt.Errorf("broker %d is not in the cluster (brokers: %s) and hosts no replicas", broker, ints(live))
		}
		if len(all) > 0 {
			moving, err := adm.ListPartitionReassignments(ctx, all)
			if err != nil {
				return apiErr(err, "ListPartitionReassignments")
			}
			if len(moving) > 0 {
				r := moving.Sorted()[0]
				return fmt.Errorf("%d partitions are being reassigned (e.g. %s-%d): wait for them (sluice reassign status) or cancel them first", len(moving), r.Topic, r.Partition)
			}
		}
		plan, err := decommissionPlan(parts, broker, live)
		if err != nil {
			return err
		}
		out := struct {
			Broker    int32       `json:"broker"`
			Plan      reassignDoc `json:"plan"`
			Executed  bool        `json:"executed"`
			Completed bool        `json:"completed"`
			NextSteps []string    `json:"next_steps"`
			Errors    []string    `json:"errors,omitempty"`
		}{Broker: broker, Plan: reassignDoc{Version: 1, Partitions: plan}}
		if out.Plan.Partitions == nil {
			out.Plan.Partitions = []reassignPartition{}
		}
		var errs []error
		if len(plan) > 0 && !*dryRun {
			var req kadm.AlterPartitionAssignmentsReq
			for _, p := range plan {
				req.Assign(p.Topic, p.Partition, p.Replicas)
			}
			resps, err := adm.AlterPartitionAssignments(ctx, req)
			if err != nil {
				return apiErr(err, "AlterPartitionAssignments")
			}
			for _, r := range resps.Sorted() {
				if r.Err != nil {
					e := fmt.Errorf("%s-%d: %s", r.Topic, r.Partition, kafkaErr(r.Err, r.ErrMessage))
					errs = append(errs, e)
					out.Errors = append(out.Errors, e.Error())
				}
			}
			out.Executed = len(errs) == 0
		}
		if *wait && !*dryRun && len(errs) == 0 {
			if err := waitMoved(o, adm, broker, *waitTimeout); err != nil {
				return err
			}
			out.Completed = true
		}
		if len(plan) == 0 {
			out.Completed = true
		}
		switch {
		case *dryRun:
			out.NextSteps = []string{"run again without --dry-run to move the replicas"}
		case out.Completed:
			out.NextSteps = []string{
				fmt.Sprintf("stop broker %d (SIGTERM: a controlled shutdown)", broker),
				fmt.Sprintf("sluice cluster unregister --broker %d --bootstrap %s", broker, o.bootstrap),
			}
		case len(errs) == 0:
			out.NextSteps = []string{
				"wait until `sluice reassign status` shows no reassignment in progress (or run decommission again with --wait)",
				fmt.Sprintf("stop broker %d (SIGTERM: a controlled shutdown)", broker),
				fmt.Sprintf("sluice cluster unregister --broker %d --bootstrap %s", broker, o.bootstrap),
			}
		}
		if err := o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Broker %d hosts %d replicas; %d to move.\n", broker, hosted, len(plan))
			if len(plan) > 0 {
				fmt.Fprintln(w, "\nTOPIC\tPARTITION\tREPLICAS\tTARGET")
				byName := map[string][]int32{}
				for _, p := range parts {
					byName[fmt.Sprintf("%s-%d", p.Topic, p.Partition)] = p.Replicas
				}
				for _, p := range plan {
					fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", p.Topic, p.Partition, ints(byName[fmt.Sprintf("%s-%d", p.Topic, p.Partition)]), ints(p.Replicas))
				}
			}
			switch {
			case *dryRun:
				fmt.Fprintln(w, "\nDry run: nothing was changed.")
			case out.Completed:
				fmt.Fprintf(w, "\nBroker %d hosts no replicas now.\n", broker)
			case out.Executed:
				fmt.Fprintln(w, "\nReassignment started (the data is still moving).")
			}
			if len(out.NextSteps) > 0 {
				fmt.Fprintln(w, "\nNext steps:")
				for i, s := range out.NextSteps {
					fmt.Fprintf(w, "  %d. %s\n", i+1, s)
				}
			}
		}); err != nil {
			return err
		}
		return joinErrs(errs)
	})
}

// waitMoved polls until no reassignment is in progress and no partition
// lists broker as a replica, for at most d; each poll is bounded by
// --timeout. A line of progress goes to standard error every 10 s.
func waitMoved(o *adminOpts, adm *kadm.Client, broker int32, d time.Duration) error {
	ctx, cancel := signalContext(d)
	defer cancel()
	lastNote := time.Now()
	for {
		left, moving, err := movingOff(ctx, o, adm, broker)
		if err == nil && left == 0 && moving == 0 {
			return nil
		}
		if time.Since(lastNote) >= 10*time.Second {
			lastNote = time.Now()
			if err != nil {
				fmt.Fprintf(o.stderr, "waiting: %v\n", err)
			} else {
				fmt.Fprintf(o.stderr, "waiting: %d partitions still list broker %d, %d reassignments in progress\n", left, broker, moving)
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d partitions still list broker %d, %d reassignments in progress", left, broker, moving)
			}
			return fmt.Errorf("gave up waiting after %v: %v (sluice reassign status shows the progress)", d, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// movingOff counts the partitions that still list broker as a replica and
// the reassignments in progress.
func movingOff(parent context.Context, o *adminOpts, adm *kadm.Client, broker int32) (left, moving int, err error) {
	ctx, cancel := context.WithTimeout(parent, o.timeout)
	defer cancel()
	md, err := adm.Metadata(ctx)
	if err != nil {
		return 0, 0, err
	}
	all := kadm.TopicsSet{}
	for _, td := range md.Topics {
		for _, p := range td.Partitions {
			all.Add(td.Topic, p.Partition)
			if slices.Contains(p.Replicas, broker) {
				left++
			}
		}
	}
	if len(all) == 0 {
		return left, 0, nil
	}
	l, err := adm.ListPartitionReassignments(ctx, all)
	if err != nil {
		return 0, 0, apiErr(err, "ListPartitionReassignments")
	}
	return left, len(l), nil
}

func (c *cli) clusterUnregister(args []string) error {
	fs, o := c.newFlags("cluster unregister", clusterUsage)
	id := fs.Int("broker", -1, "the broker whose registration to remove")
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(clusterUsage, "cluster unregister takes no arguments")
	}
	broker, err := parseBrokerFlag(fs, clusterUsage, "cluster unregister", *id)
	if err != nil {
		return err
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		if err := requireAPI(ctx, adm, apiUnregisterBroker, "UnregisterBroker"); err != nil {
			return err
		}
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = broker
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return apiErr(err, "UnregisterBroker")
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnsupportedVersion) {
				return notServed("UnregisterBroker")
			}
			msg := ""
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			return fmt.Errorf("unregister broker %d: %s", broker, kafkaErr(err, msg))
		}
		out := struct {
			Broker       int32 `json:"broker"`
			Unregistered bool  `json:"unregistered"`
		}{broker, true}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Broker %d unregistered: it is no longer listed, and a new broker may register with id %d.\n", broker, broker)
		})
	})
}
