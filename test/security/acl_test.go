package security

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

const aclJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";`

// plainAs returns client options for user on the SASL PLAIN listener.
func plainAs(addr, user string, extra ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism())}, extra...)
}

// TestACLs: a node with StandardAuthorizer and super.users=User:admin.
// The admin creates ACLs with kadm; alice may write topics prefixed
// orders- and read group g1 (and, later, topic orders-1); she is refused
// payments (produce and metadata), bob with no ACL is refused everything;
// DescribeAcls and DeleteAcls round trip, and a deleted ACL stops
// applying.
func TestACLs(t *testing.T) {
	_, saslAddr := saslNode(t, map[string]string{
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": aclJAAS,
		"authorizer.class.name":                               "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                         "User:admin",
	})
	c := ctx(t, 60*time.Second)
	adm := kadm.NewClient(client(t, plainAs(saslAddr, "admin")...))
	if _, err := adm.CreateTopic(c, 1, 1, nil, "orders-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(c, 1, 1, nil, "payments"); err != nil {
		t.Fatal(err)
	}
	write := kadm.NewACLs().Allow("User:alice").AllowHosts().
		Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite)
	group := kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("g1").Operations(kadm.OpRead)
	for _, b := range []*kadm.ACLBuilder{write, group} {
		res, err := adm.CreateACLs(c, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs %v: %v", r, r.Err)
			}
		}
	}

	// alice: produce to orders-1, refused payments with nothing appended.
	alice := client(t, plainAs(saslAddr, "alice", kgo.RecordRetries(0), kgo.DisableIdempotentWrite())...)
	if err := alice.ProduceSync(c, &kgo.Record{Topic: "orders-1", Value: []byte("o1")}).FirstErr(); err != nil {
		t.Fatalf("alice produce to orders-1: %v", err)
	}
	pctx, cancel := context.WithTimeout(c, 10*time.Second)
	err := alice.ProduceSync(pctx, &kgo.Record{Topic: "payments", Value: []byte("p1")}).FirstErr()
	cancel()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produce to payments: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	ends, err := adm.ListEndOffsets(c, "payments", "orders-1")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("payments", 0); o.Offset != 0 {
		t.Errorf("payments end offset %d after a refused produce, want 0", o.Offset)
	}
	if o, _ := ends.Lookup("orders-1", 0); o.Offset != 1 {
		t.Errorf("orders-1 end offset %d, want 1", o.Offset)
	}
	// Metadata: alice sees orders-1 (WRITE implies DESCRIBE) only.
	md, err := kadm.NewClient(alice).Metadata(c)
	if err != nil {
		t.Fatal(err)
	}
	if md.Topics.Has("payments") || !md.Topics.Has("orders-1") {
		t.Errorf("alice's metadata lists %v, want orders-1 and not payments", md.Topics.Names())
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("payments")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(c, alice)
	if err != nil || len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice's metadata of payments: %+v %v, want TOPIC_AUTHORIZATION_FAILED", mresp, err)
	}

	// bob: no ACL, refused.
	bob := client(t, plainAs(saslAddr, "bob", kgo.RecordRetries(0), kgo.DisableIdempotentWrite())...)
	pctx, cancel = context.WithTimeout(c, 10*time.Second)
	err = bob.ProduceSync(pctx, &kgo.Record{Topic: "orders-1", Value: []byte("b")}).FirstErr()
	cancel()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("bob produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := describeErr(c, kadm.NewClient(bob)); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob DescribeAcls: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	// Operations need ALTER / DESCRIBE on the cluster (KafkaApis).
	bobAdm := kadm.NewClient(bob)
	if _, err := bobAdm.ElectLeaders(c, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders-1": {0: {}}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		if res, err2 := bobAdm.ElectLeaders(c, kadm.ElectPreferredReplica, kadm.TopicsSet{"orders-1": {0: {}}}); err2 != nil || res["orders-1"][0].Err == nil ||
			!errors.Is(res["orders-1"][0].Err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("bob ElectLeaders: %v / %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
		}
	}
	if _, err := bobAdm.ListPartitionReassignments(c, kadm.TopicsSet{"orders-1": {0: {}}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob ListPartitionReassignments: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	unreg := kmsg.NewPtrUnregisterBrokerRequest()
	unreg.BrokerID = 99
	if resp, err := unreg.RequestWith(c, bob); err != nil || !errors.Is(kerr.ErrorForCode(resp.ErrorCode), kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob UnregisterBroker: %v / %+v, want CLUSTER_AUTHORIZATION_FAILED", err, resp)
	}
	// Fetching as a follower (a replica id) needs CLUSTER_ACTION: alice,
	// who may write orders-1, gets TOPIC_AUTHORIZATION_FAILED and no
	// records (KafkaApis.handleFetchRequest).
	td, err := adm.ListTopics(c, "orders-1")
	if err != nil || td["orders-1"].Err != nil {
		t.Fatalf("orders-1: %v %v", err, td["orders-1"].Err)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.ReplicaID, freq.ReplicaState.ID, freq.ReplicaState.Epoch = 2, 2, -1
	freq.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "orders-1", td["orders-1"].ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(c, alice)
	if err != nil {
		t.Fatalf("alice's follower fetch: %v", err)
	}
	if len(fresp.Topics) != 1 || len(fresp.Topics[0].Partitions) != 1 {
		t.Fatalf("alice's follower fetch: %+v", fresp)
	}
	for _, ft := range fresp.Topics {
		for _, fp := range ft.Partitions {
			if fp.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(fp.RecordBatches) != 0 {
				t.Fatalf("alice's follower fetch: error %d, %d bytes of records; want TOPIC_AUTHORIZATION_FAILED and none", fp.ErrorCode, len(fp.RecordBatches))
			}
		}
	}

	// A consumer group as alice: refused without READ on the topic, then
	// consumes once it is granted.
	consume := func() error {
		// Closed before the next try, so that it leaves the group.
		cl, err := kgo.NewClient(plainAs(saslAddr, "alice", kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("orders-1"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			return err
		}
		defer cl.Close()
		fctx, cancel := context.WithTimeout(c, 15*time.Second)
		defer cancel()
		for {
			fs := cl.PollFetches(fctx)
			if err := fctx.Err(); err != nil {
				return err
			}
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) { ferr = err })
			if ferr != nil {
				return ferr
			}
			if fs.NumRecords() > 0 {
				return cl.CommitUncommittedOffsets(fctx)
			}
		}
	}
	if err := consume(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice consume without READ on orders-1: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	read := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders-1").Operations(kadm.OpRead)
	if res, err := adm.CreateACLs(c, read); err != nil || res[0].Err != nil {
		t.Fatalf("CreateACLs READ orders-1: %v %v", res, err)
	}
	if err := consume(); err != nil {
		t.Fatalf("alice consume with READ on orders-1 and g1: %v", err)
	}
	offs, err := adm.FetchOffsets(c, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("orders-1", 0); !ok || o.At != 1 {
		t.Errorf("g1's committed offset of orders-1: %+v %v, want 1", o, ok)
	}

	// DescribeAcls, DeleteAcls, and the deletion applies.
	described, err := adm.DescribeACLs(c, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range described {
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		n += len(d.Described)
	}
	if n != 3 {
		t.Fatalf("DescribeACLs: %d bindings, want 3: %+v", n, described)
	}
	deleted, err := adm.DeleteACLs(c, kadm.NewACLs().Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Allow().AllowHosts().Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %+v", deleted)
	}
	pctx, cancel = context.WithTimeout(c, 10*time.Second)
	err = alice.ProduceSync(pctx, &kgo.Record{Topic: "orders-1", Value: []byte("o2")}).FirstErr()
	cancel()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice produce after the WRITE ACL was deleted: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

// TestACLsSecurityDisabled: without authorizer.class.name DescribeAcls
// answers SECURITY_DISABLED (what MirrorMaker 2 and UIs test for).
func TestACLsSecurityDisabled(t *testing.T) {
	_, saslAddr := saslNode(t, nil)
	adm := kadm.NewClient(client(t, plainAs(saslAddr, "alice")...))
	if err := describeErr(ctx(t, 30*time.Second), adm); !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeAcls without an authorizer: %v, want SECURITY_DISABLED", err)
	}
}

// describeErr describes every ACL and returns the request's or the
// result's error.
func describeErr(c context.Context, adm *kadm.Client) error {
	res, err := adm.DescribeACLs(c, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err == nil && len(res) == 0 {
		return errors.New("no DescribeAcls result")
	}
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}
