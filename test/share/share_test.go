// Package share tests KIP-932 share partitions on real sluice processes.
package share

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

func tctx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func memberID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// shareFetch opens a share session on node id for partition p of topic
// and returns the response.
func shareFetch(t *testing.T, cl *kgo.Client, id int32, group, member string, topic [16]byte, p int32) *kmsg.ShareFetchResponse {
	t.Helper()
	req := kmsg.NewPtrShareFetchRequest()
	req.Version, req.GroupID, req.MemberID = 1, &group, &member
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = topic
	rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: p}}
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(id)).Request(tctx(t, 15*time.Second), req)
	if err != nil {
		t.Fatalf("ShareFetch to node %d: %v", id, err)
	}
	return resp.(*kmsg.ShareFetchResponse)
}

// TestSharePartitionsOnLeaders: on three nodes with a 3-partition RF 3
// topic, each partition's share partition lives on its leader. A follower
// answers NOT_LEADER_OR_FOLLOWER naming the leader; on the leader two
// members split the records and together get each once.
func TestSharePartitionsOnLeaders(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 3, StartTimeout: 30 * time.Second,
		Props: map[string]string{"default.replication.factor": "3", "offsets.topic.replication.factor": "3"}})
	cl := c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequestRetries(0))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(tctx(t, 30*time.Second), 3, 3, nil, "q"); err != nil {
		t.Fatal(err)
	}
	const perPartition = 30
	var meta map[int32]testcluster.PartitionMeta
	testcluster.WaitFor(t, 30*time.Second, "leaders with a full ISR", func() (bool, string) {
		var err error
		meta, err = c.Meta("q")
		if err != nil || len(meta) != 3 {
			return false, fmt.Sprint(err)
		}
		for _, m := range meta {
			if m.Leader < 0 || len(m.ISR) != 3 {
				return false, m.String()
			}
		}
		return true, ""
	})
	for p := int32(0); p < 3; p++ {
		for i := 0; i < perPartition; i++ {
			r := &kgo.Record{Topic: "q", Partition: p, Value: []byte(fmt.Sprint(i))}
			if err := cl.ProduceSync(tctx(t, 30*time.Second), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	td, err := adm.ListTopics(tctx(t, 10*time.Second), "q")
	if err != nil {
		t.Fatal(err)
	}
	topicID := td["q"].ID
	// The group starts at the earliest offset.
	set := "earliest"
	ireq := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sg"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "share.auto.offset.reset", &set
	rr.Configs = append(rr.Configs, cfg)
	ireq.Resources = append(ireq.Resources, rr)
	iresp, err := ireq.RequestWith(tctx(t, 10*time.Second), cl)
	if err != nil || iresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, iresp)
	}
	waitGroupConfig(t, c, cl, "sg", "share.auto.offset.reset", "earliest")

	for p := int32(0); p < 3; p++ {
		leader := meta[p].Leader
		follower := (leader % 3) + 1
		r := shareFetch(t, cl, follower, "sg", memberID(), topicID, p)
		if r.ErrorCode != 0 || len(r.Topics) != 1 {
			t.Fatalf("partition %d on follower %d: %+v", p, follower, r)
		}
		fp := r.Topics[0].Partitions[0]
		if fp.ErrorCode != kerr.NotLeaderForPartition.Code || fp.CurrentLeader.LeaderID != leader {
			t.Fatalf("partition %d on follower %d: %v, leader %d (want %d)", p, follower, kerr.ErrorForCode(fp.ErrorCode), fp.CurrentLeader.LeaderID, leader)
		}
		// The leader's endpoint comes along (KIP-951).
		if len(r.NodeEndpoints) != 1 || r.NodeEndpoints[0].NodeID != leader ||
			fmt.Sprintf("%s:%d", r.NodeEndpoints[0].Host, r.NodeEndpoints[0].Port) != c.Node(leader).Addr() {
			t.Fatalf("partition %d on follower %d: endpoints %+v, leader %d at %s", p, follower, r.NodeEndpoints, leader, c.Node(leader).Addr())
		}
		seen := map[int64]bool{}
		for _, m := range []string{memberID(), memberID()} {
			req := kmsg.NewPtrShareFetchRequest()
			group := "sg"
			req.Version, req.GroupID, req.MemberID, req.MaxRecords = 1, &group, &m, perPartition/2
			rt := kmsg.NewShareFetchRequestTopic()
			rt.TopicID = topicID
			rt.Partitions = []kmsg.ShareFetchRequestTopicPartition{{Partition: p}}
			req.Topics = append(req.Topics, rt)
			resp, err := cl.Broker(int(leader)).Request(tctx(t, 15*time.Second), req)
			if err != nil {
				t.Fatal(err)
			}
			sr := resp.(*kmsg.ShareFetchResponse)
			if sr.ErrorCode != 0 || sr.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("partition %d on leader %d: %+v", p, leader, sr)
			}
			for _, a := range sr.Topics[0].Partitions[0].AcquiredRecords {
				for o := a.FirstOffset; o <= a.LastOffset; o++ {
					if seen[o] {
						t.Fatalf("partition %d offset %d given twice", p, o)
					}
					seen[o] = true
				}
			}
		}
		if len(seen) != perPartition {
			t.Fatalf("partition %d: %d of %d records acquired", p, len(seen), perPartition)
		}
	}
}

// waitGroupConfig waits until every node describes group's config name
// as value.
func waitGroupConfig(t *testing.T, c *testcluster.Cluster, cl *kgo.Client, group, name, value string) {
	t.Helper()
	for _, p := range c.Nodes() {
		id := p.NodeID()
		testcluster.WaitFor(t, 15*time.Second, "the group config on every node", func() (bool, string) {
			dreq := kmsg.NewPtrDescribeConfigsRequest()
			dr := kmsg.NewDescribeConfigsRequestResource()
			dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
			dreq.Resources = append(dreq.Resources, dr)
			resp, err := cl.Broker(id).Request(tctx(t, 5*time.Second), dreq)
			if err != nil {
				return false, err.Error()
			}
			for _, c := range resp.(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
				if c.Name == name && c.Value != nil && *c.Value == value {
					return true, ""
				}
			}
			return false, fmt.Sprintf("node %d", id)
		})
	}
}
