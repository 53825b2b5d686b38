package admin

// sluice quorum: Kafka's kafka-metadata-quorum.sh (KIP-595, KIP-853):
// describe the metadata quorum, add a controller, remove one.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quorumUsage is the usage text of `sluice quorum`.
const quorumUsage = `usage:
  sluice quorum describe
  sluice quorum add-controller --id N --controller-address HOST:PORT [--wait 30s]
  sluice quorum remove-controller --id N

describe shows the active controller, its term and high watermark, and
each voter's and observer's log end offset (-1: it did not answer).
add-controller makes node N, started with --controller-listen HOST:PORT
and not listed in --voters, a voter once its metadata log has caught up
(it times out and changes nothing otherwise). remove-controller takes a
voter out of the quorum; it is refused if the voters left could not form
a live majority. docs/operations.md, "Change the controller quorum".
`

func (c *cli) quorumCmd(args []string) error {
	return c.subcommand("quorum", quorumUsage, args, map[string]func([]string) error{
		"describe":          c.quorumDescribe,
		"add-controller":    c.quorumAdd,
		"remove-controller": c.quorumRemove,
	})
}

// describeQuorum asks for the metadata quorum's state (DescribeQuorum,
// KIP-595/KIP-836, the __cluster_metadata partition).
func describeQuorum(ctx context.Context, cl *kgo.Client) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("DescribeQuorum: unexpected answer")
	}
	p := &resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return nil, err
	}
	return p, nil
}

func (c *cli) quorumDescribe(args []string) error {
	fs, o := c.newFlags("quorum describe", quorumUsage)
	return runAdmin(fs, o, args, noArgs(quorumUsage, "quorum describe"), func(ctx context.Context, _ *kadm.Client, _ []string) error {
		p, err := describeQuorum(ctx, o.cl)
		if err != nil {
			return err
		}
		type member struct {
			ID           int32  `json:"id"`
			Role         string `json:"role"`
			LogEndOffset int64  `json:"log_end_offset"`
			Lag          int64  `json:"lag"`
		}
		out := struct {
			LeaderID      int32    `json:"leader_id"`
			LeaderEpoch   int32    `json:"leader_epoch"`
			HighWatermark int64    `json:"high_watermark"`
			Members       []member `json:"members"`
		}{LeaderID: p.LeaderID, LeaderEpoch: p.LeaderEpoch, HighWatermark: p.HighWatermark, Members: []member{}}
		add := func(role string, rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) {
			for _, r := range rs {
				lag := int64(-1)
				if r.LogEndOffset >= 0 {
					lag = max(0, p.HighWatermark-r.LogEndOffset)
				}
				if role == "Follower" && r.ReplicaID == p.LeaderID {
					role = "Leader"
				}
				out.Members = append(out.Members, member{r.ReplicaID, role, r.LogEndOffset, lag})
				if role == "Leader" {
					role = "Follower"
				}
			}
		}
		add("Follower", p.CurrentVoters)
		add("Observer", p.Observers)
		return o.emit(out, func(w *tabwriter.Writer) {
			fmt.Fprintf(w, "LeaderId:\t%d\nLeaderEpoch:\t%d\nHighWatermark:\t%d\n\n", out.LeaderID, out.LeaderEpoch, out.HighWatermark)
			fmt.Fprintln(w, "NODE\tROLE\tLOG-END-OFFSET\tLAG")
			for _, m := range out.Members {
				fmt.Fprintf(w, "%d\t%s\t%d\t%d\n", m.ID, m.Role, m.LogEndOffset, m.Lag)
			}
		})
	})
}

func (c *cli) quorumAdd(args []string) error {
	fs, o := c.newFlags("quorum add-controller", quorumUsage)
	id := fs.Int("id", -1, "node id of the new controller")
	address := fs.String("controller-address", "", "its controller listener, HOST:PORT")
	wait := fs.Duration("wait", 0, "how long the quorum waits for it to catch up (default 30s)")
	check := func(pos []string) error {
		if len(pos) != 0 || *id < 0 || *address == "" {
			return usageErrorf(quorumUsage, "quorum add-controller needs --id and --controller-address, and no arguments")
		}
		if _, _, err := net.SplitHostPort(*address); err != nil {
			return usageErrorf(quorumUsage, "--controller-address: %v", err)
		}
		return nil
	}
	return runAdmin(fs, o, args, check, func(ctx context.Context, _ *kadm.Client, _ []string) error {
		host, port, _ := net.SplitHostPort(*address)
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return usageErrorf(quorumUsage, "--controller-address: bad port %q", port)
		}
		req := kmsg.NewPtrAddRaftVoterRequest()
		req.VoterID, req.TimeoutMillis = int32(*id), int32(wait.Milliseconds())
		l := kmsg.NewAddRaftVoterRequestListener()
		l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(p)
		req.Listeners = append(req.Listeners, l)
		resp, err := req.RequestWith(ctx, o.cl)
		if err != nil {
			return err
		}
		return quorumResult(o, resp.ErrorCode, resp.ErrorMessage, fmt.Sprintf("node %d is a voter", *id))
	})
}

func (c *cli) quorumRemove(args []string) error {
	fs, o := c.newFlags("quorum remove-controller", quorumUsage)
	id := fs.Int("id", -1, "node id of the controller to remove")
	check := func(pos []string) error {
		if len(pos) != 0 || *id < 0 {
			return usageErrorf(quorumUsage, "quorum remove-controller needs --id and no arguments")
		}
		return nil
	}
	return runAdmin(fs, o, args, check, func(ctx context.Context, _ *kadm.Client, _ []string) error {
		req := kmsg.NewPtrRemoveRaftVoterRequest()
		req.VoterID = int32(*id)
		resp, err := req.RequestWith(ctx, o.cl)
		if err != nil {
			return err
		}
		return quorumResult(o, resp.ErrorCode, resp.ErrorMessage, fmt.Sprintf("node %d is no longer a voter", *id))
	})
}

// quorumResult turns a voter change's answer into the command's result.
func quorumResult(o *adminOpts, code int16, msg *string, done string) error {
	if err := kerr.ErrorForCode(code); err != nil {
		if msg != nil && *msg != "" {
			return fmt.Errorf("%w: %s", err, *msg)
		}
		return err
	}
	return o.emit(struct {
		Result string `json:"result"`
	}{done}, func(w *tabwriter.Writer) { fmt.Fprintln(w, done) })
}
