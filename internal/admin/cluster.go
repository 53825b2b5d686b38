package admin

// sluice cluster status (decommission and unregister are in
// decommission.go): the brokers (kafka-broker-api-versions.sh lists
// them; kafka-metadata-quorum.sh names the controller) and the partitions
// kafka-topics.sh --describe --under-replicated-partitions and
// --unavailable-partitions would print, from one Metadata request.

import (
	"context"
	"fmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"text/tabwriter"
)

// clusterUsage is the usage text of `sluice cluster`.
const clusterUsage = `usage:
  sluice cluster status
  sluice cluster decommission --broker ID [--wait] [--wait-timeout 1h] [--dry-run]
  sluice cluster unregister --broker ID

status lists the brokers (id, host:port, rack, controller: the active
controller, from DescribeQuorum where the cluster answers it), the number of
topics and partitions, the under-replicated partitions (ISR smaller than
the replicas) and the offline partitions (no leader).

decommission moves every replica of the broker (internal topics too) to
the other live brokers, balanced, and only those replicas
(AlterPartitionAssignments); --wait returns once no partition lists the
broker and no reassignment is in progress. It refuses while another
reassignment is in progress. Then stop the broker and unregister it.

unregister removes a stopped broker's registration (UnregisterBroker):
refused while the broker is running or still hosts a replica.
`

func (c *cli) clusterCmd(args []string) error {
	return c.subcommand("cluster", clusterUsage, args, map[string]func([]string) error{
		"status":       c.clusterStatus,
		"decommission": c.clusterDecommission,
		"unregister":   c.clusterUnregister,
	})
}

// brokerInfo is one broker in `cluster status`.
type brokerInfo struct {
	ID         int32  `json:"id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller"`
}

// clusterInfo is the output of `cluster status`.
type clusterInfo struct {
	ClusterID       string          `json:"cluster_id"`
	Controller      int32           `json:"controller"`
	Brokers         []brokerInfo    `json:"brokers"`
	Topics          int             `json:"topics"`
	InternalTopics  int             `json:"internal_topics"`
	Partitions      int             `json:"partitions"`
	UnderReplicated []partitionInfo `json:"under_replicated_partitions"`
	Offline         []partitionInfo `json:"offline_partitions"`
}

// activeController names the active controller: the metadata quorum's
// leader (DescribeQuorum) where the cluster answers it, else
// DescribeCluster's controller id, else mdController (Metadata's). A KRaft
// broker answers Metadata and DescribeCluster with a broker of its choice
// (Kafka's KRaftMetadataCache.getRandomAliveBrokerId; a sluice broker names
// itself), not the controller, so those are only the fallbacks for
// clusters without DescribeQuorum (ZooKeeper-era Kafka, where they do name
// the controller).
func activeController(ctx context.Context, cl *kgo.Client, mdController int32) int32 {
	if p, err := describeQuorum(ctx, cl); err == nil && p.LeaderID >= 0 {
		return p.LeaderID
	}
	resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err == nil && resp.ErrorCode == 0 && resp.ControllerID >= 0 {
		return resp.ControllerID
	}
	return mdController
}

func (c *cli) clusterStatus(args []string) error {
	fs, o := c.newFlags("cluster status", clusterUsage)
	pos, err := o.parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf(clusterUsage, "cluster status takes no arguments")
	}
	return o.run(func(ctx context.Context, cl *kgo.Client, adm *kadm.Client) error {
		md, err := adm.Metadata(ctx)
		if err != nil {
			return err
		}
		out := clusterInfo{ClusterID: md.Cluster, Controller: activeController(ctx, cl, md.Controller),
			Brokers: []brokerInfo{}, UnderReplicated: []partitionInfo{}, Offline: []partitionInfo{}}
		for _, b := range md.Brokers {
			bi := brokerInfo{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == out.Controller}
			if b.Rack != nil {
				bi.Rack = *b.Rack
			}
			out.Brokers = append(out.Brokers, bi)
		}
		for _, td := range md.Topics.Sorted() {
			if td.IsInternal {
				out.InternalTopics++
			} else {
				out.Topics++
			}
			for _, p := range td.Partitions.Sorted() {
				out.Partitions++
				pi := newPartitionInfo(p)
				pi.Topic = td.Topic
				// An offline partition is listed as offline only: with
				// eligible leader replicas its ISR is empty, which would
				// also make it under-replicated.
				if p.Leader < 0 {
					out.Offline = append(out.Offline, pi)
				} else if len(p.ISR) < len(p.Replicas) {
					out.UnderReplicated = append(out.UnderReplicated, pi)
				}
			}
		}
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "Cluster %s: %d brokers, %d topics (+%d internal), %d partitions, %d under-replicated, %d offline.\n\n",
				out.ClusterID, len(out.Brokers), out.Topics, out.InternalTopics, out.Partitions, len(out.UnderReplicated), len(out.Offline))
			fmt.Fprintln(w, "BROKER\tADDRESS\tRACK\tCONTROLLER")
			for _, b := range out.Brokers {
				ctl := ""
				if b.Controller {
					ctl = "yes"
				}
				fmt.Fprintf(w, "%d\t%s:%d\t%s\t%s\n", b.ID, b.Host, b.Port, b.Rack, ctl)
			}
			for _, sec := range []struct {
				title string
				ps    []partitionInfo
			}{{"Under-replicated partitions", out.UnderReplicated}, {"Offline partitions", out.Offline}} {
				if len(sec.ps) == 0 {
					continue
				}
				fmt.Fprintf(w, "\n%s:\n", sec.title)
				fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tREPLICAS\tISR")
				for _, p := range sec.ps {
					fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", p.Topic, p.Partition, p.Leader, ints(p.Replicas), ints(p.ISR))
				}
			}
		})
	})
}
