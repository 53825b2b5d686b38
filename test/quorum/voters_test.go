// Package quorum changes the metadata quorum of a running cluster of real
// `sluice serve` processes with Kafka's KIP-853 APIs (AddRaftVoter,
// RemoveRaftVoter, DescribeQuorum), as kafka-metadata-quorum.sh does.
package quorum

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// voters returns DescribeQuorum's voter and observer ids.
func describe(t *testing.T, cl *kgo.Client) (leader int32, voters, observers []int32) {
	t.Helper()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("DescribeQuorum: %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	for _, v := range p.CurrentVoters {
		voters = append(voters, v.ReplicaID)
		if v.ReplicaID == p.LeaderID && v.LogEndOffset < p.HighWatermark {
			t.Errorf("leader %d's log end %d is below the high watermark %d", v.ReplicaID, v.LogEndOffset, p.HighWatermark)
		}
	}
	for _, o := range p.Observers {
		observers = append(observers, o.ReplicaID)
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return p.LeaderID, voters, observers
}

func addVoter(t *testing.T, cl *kgo.Client, id int32, port int, timeout time.Duration, clusterID *string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.VoterID, req.TimeoutMillis, req.ClusterID = id, int32(timeout/time.Millisecond), clusterID
	l := kmsg.NewAddRaftVoterRequestListener()
	l.Name, l.Host, l.Port = "CONTROLLER", "127.0.0.1", uint16(port)
	req.Listeners = append(req.Listeners, l)
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	msg := ""
	if resp.ErrorMessage != nil {
		msg = *resp.ErrorMessage
	}
	return resp.ErrorCode, msg
}

func removeVoter(t *testing.T, cl *kgo.Client, id int32) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID = id
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	msg := ""
	if resp.ErrorMessage != nil {
		msg = *resp.ErrorMessage
	}
	return resp.ErrorCode, msg
}

func waitVoters(t *testing.T, cl *kgo.Client, want []int32) {
	t.Helper()
	testcluster.WaitFor(t, 30*time.Second, fmt.Sprintf("voters %v", want), func() (bool, string) {
		_, v, o := describe(t, cl)
		return slices.Equal(v, want), fmt.Sprintf("voters %v observers %v", v, o)
	})
}

// TestAddAndRemoveVoters: a fourth node started with a controller
// listener joins the quorum through AddRaftVoter, voter 1 leaves through
// RemoveRaftVoter and is stopped, and the cluster goes on creating topics
// and taking acks=all writes under the new quorum {2,3,4}. Bad requests
// change nothing: a duplicate voter, an unknown voter, another cluster's
// id, a node that is not running, and a removal that would leave a
// quorum without a majority.
func TestAddAndRemoveVoters(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, Props: map[string]string{"auto.create.topics.enable": "false"}})
	args := c.Node(1).Args()
	voters := args[slices.Index(args, "--voters")+1]
	ports, err := testproc.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	n4 := testproc.Start(t, testproc.Options{NodeID: 4, ListenPort: ports[0], ControllerPort: ports[1], HTTPPort: ports[2],
		ExtraArgs: []string{"--voters", voters, "--config", args[slices.Index(args, "--config")+1]}})
	c.WaitBrokers(4, time.Minute)
	cl := c.Node(2).Client(t)
	if _, v, o := describe(t, cl); !slices.Equal(v, []int32{1, 2, 3}) || !slices.Contains(o, 4) {
		t.Fatalf("before: voters %v observers %v, want voters [1 2 3] and observer 4", v, o)
	}

	if code, msg := addVoter(t, cl, 4, ports[1], 30*time.Second, nil); code != 0 {
		t.Fatalf("AddRaftVoter 4: %v %s", kerr.ErrorForCode(code), msg)
	}
	waitVoters(t, cl, []int32{1, 2, 3, 4})

	// Bad requests change nothing.
	if code, _ := addVoter(t, cl, 4, ports[1], 5*time.Second, nil); code != kerr.DuplicateVoter.Code {
		t.Errorf("AddRaftVoter 4 again: %v, want DUPLICATE_VOTER", kerr.ErrorForCode(code))
	}
	other := "not-this-cluster"
	if code, _ := addVoter(t, cl, 7, 1, 5*time.Second, &other); code != kerr.InconsistentClusterID.Code {
		t.Errorf("AddRaftVoter with another cluster id: %v, want INCONSISTENT_CLUSTER_ID", kerr.ErrorForCode(code))
	}
	dead, err := testproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	if code, msg := addVoter(t, cl, 7, dead[0], 3*time.Second, nil); code != kerr.RequestTimedOut.Code {
		t.Errorf("AddRaftVoter of a node that is not running: %v %s, want REQUEST_TIMED_OUT", kerr.ErrorForCode(code), msg)
	}
	if code, _ := removeVoter(t, cl, 9); code != kerr.VoterNotFound.Code {
		t.Errorf("RemoveRaftVoter 9: %v, want VOTER_NOT_FOUND", kerr.ErrorForCode(code))
	}
	waitVoters(t, cl, []int32{1, 2, 3, 4})
	if _, _, o := describe(t, cl); slices.Contains(o, 7) {
		t.Errorf("the refused node 7 stayed in the configuration: observers %v", o)
	}

	// Voter 1 leaves (with the CLI, kafka-metadata-quorum.sh's
	// remove-controller) and stops; {2,3,4} carry the metadata.
	if out, err := sluice(t, "quorum", "remove-controller", "--id", "1", "--bootstrap", c.Node(2).Addr()); err != nil {
		t.Fatalf("sluice quorum remove-controller --id 1: %v\n%s", err, out)
	}
	waitVoters(t, cl, []int32{2, 3, 4})
	c.Node(1).Stop()
	adm := c.Node(3).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testcluster.WaitFor(t, 30*time.Second, "a topic created by the new quorum", func() (bool, string) {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "after-change", 2, 3
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10000
		resp, err := req.RequestWith(ctx, adm)
		if err != nil {
			return false, err.Error()
		}
		if e := resp.Topics[0].ErrorCode; e != 0 && e != kerr.TopicAlreadyExists.Code {
			return false, kerr.ErrorForCode(e).Error()
		}
		return true, ""
	})
	pc := c.Node(3).Client(t, kgo.DefaultProduceTopic("after-change"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := pc.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce under the new quorum: %v", err)
	}

	// With 4 down, removing 2 would leave {3,4} with one live voter.
	n4.Kill()
	code, msg := removeVoter(t, cl, 2)
	if code != kerr.InvalidRequest.Code || !strings.Contains(msg, "quorum would be lost") {
		t.Errorf("RemoveRaftVoter 2 with voter 4 down: %v %q, want INVALID_REQUEST (quorum lost)", kerr.ErrorForCode(code), msg)
	}
	n4.Restart()
	waitVoters(t, cl, []int32{2, 3, 4})
	out, err := sluice(t, "quorum", "describe", "--json", "--bootstrap", c.Node(3).Addr())
	if err != nil {
		t.Fatalf("sluice quorum describe: %v\n%s", err, out)
	}
	var d struct {
		LeaderID int32 `json:"leader_id"`
		Members  []struct {
			ID   int32  `json:"id"`
			Role string `json:"role"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("sluice quorum describe --json: %v\n%s", err, out)
	}
	roles := map[int32]string{}
	for _, m := range d.Members {
		roles[m.ID] = m.Role
	}
	for _, id := range []int32{2, 3, 4} {
		if r := roles[id]; r != "Leader" && r != "Follower" {
			t.Errorf("sluice quorum describe: node %d is %q, want a voter:\n%s", id, r, out)
		}
	}
	if roles[d.LeaderID] != "Leader" {
		t.Errorf("sluice quorum describe: leader %d listed as %q", d.LeaderID, roles[d.LeaderID])
	}
}

// sluice runs the built binary's command (bounded by a minute).
func sluice(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, testproc.Build(t), args...).CombinedOutput()
	return string(b), err
}
