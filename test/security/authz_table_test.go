package security

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

const authzJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret" user_carol="carol-secret";`

// authzUsers are the table's columns: admin is a super user, alice has
// prefixed ALLOW ACLs on topics orders-, READ on group g1 and WRITE on
// transactional id tx-a, carol has ALLOW ALL on topic payments and DENY
// READ on it, bob has no ACL.
var authzUsers = []string{"admin", "alice", "carol", "bob"}

// notRefused is a cell for a request the node cannot carry out (a single
// node has no broker 99 to unregister, no reassignment to cancel, ...):
// only the authorization outcome is checked, any code but an
// *_AUTHORIZATION_FAILED one.
const notRefused = "not refused"

const (
	okCode = "OK"
	taf    = "TOPIC_AUTHORIZATION_FAILED"
	gaf    = "GROUP_AUTHORIZATION_FAILED"
	caf    = "CLUSTER_AUTHORIZATION_FAILED"
	tiaf   = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
)

// codeName is the name of a Kafka error code, OK for 0.
func codeName(code int16) string {
	if code == 0 {
		return okCode
	}
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return fmt.Sprintf("code %d", code)
}

// errName is codeName of a client error carrying a Kafka error; other
// errors are returned.
func errName(err error) (string, error) {
	if err == nil {
		return okCode, nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message, nil
	}
	return "", err
}

// authzRow is one API of the table: run sends it as user through cl and
// returns the code name (or a short description of what was visible);
// want holds the expected cell per authzUsers column. run also checks,
// through the super user's client, that a refused request did nothing.
type authzRow struct {
	api  string
	want [4]string
	run  func(c context.Context, user string, cl *kgo.Client) (string, error)
}

// TestAuthorizationTable checks, on one node with StandardAuthorizer, the
// code each API answers to each principal, as Kafka's KafkaApis /
// ControllerApis (through AuthHelper) answer it: a principal without
// ACLs sees no topics, DENY beats ALLOW, prefixed ACLs apply and the
// super user bypasses the ACLs. Requests go straight to the node (not
// through the client's routing), one row per API, and the table is
// logged as it is checked. Refused Produce, CreateTopics, DeleteTopics,
// CreatePartitions, IncrementalAlterConfigs, OffsetCommit, CreateAcls,
// DeleteAcls, AlterUserScramCredentials and DeleteGroups are checked to
// have changed nothing. Cells marked notRefused are requests a single
// node cannot carry out; there only the authorization outcome counts. A
// connection with a wrong password gets SASL_AUTHENTICATION_FAILED
// before any request.
func TestAuthorizationTable(t *testing.T) {
	_, saslAddr := saslNode(t, map[string]string{
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": authzJAAS,
		"authorizer.class.name":                               "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                         "User:admin",
		// The node sends itself transaction markers, which need
		// CLUSTER_ACTION: its inter-broker principal is the super user.
		"inter.broker.listener.name":           "SASL_PLAINTEXT",
		"sasl.mechanism.inter.broker.protocol": "PLAIN",
	})
	c := ctx(t, 4*time.Minute)
	// AddPartitionsToTxn v4+ is the broker-to-broker form (it needs
	// CLUSTER_ACTION); clients send v3 and below.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
	clients := map[string]*kgo.Client{}
	for _, u := range authzUsers {
		clients[u] = client(t, plainAs(saslAddr, u, kgo.MaxVersions(versions), kgo.RecordRetries(0),
			kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	}
	adm := kadm.NewClient(clients["admin"])

	// Setup as the super user: topics, a committed offset of g1, ACLs.
	topics := []string{"orders-1", "payments"}
	for _, u := range authzUsers {
		topics = append(topics, "orders-d-"+u)
	}
	for _, tp := range topics {
		if _, err := adm.CreateTopic(c, 1, 1, nil, tp); err != nil {
			t.Fatalf("create %s: %v", tp, err)
		}
	}
	td, err := adm.ListTopics(c, "orders-1", "payments")
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []string{"orders-1", "payments"} {
		if err := clients["admin"].ProduceSync(c, &kgo.Record{Topic: tp, Value: []byte("seed")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", tp, err)
		}
	}
	brokers, err := adm.ListBrokers(c)
	if err != nil || len(brokers) != 1 {
		t.Fatalf("brokers: %v %v", brokers, err)
	}
	nodeID := fmt.Sprint(brokers[0].NodeID)
	// direct sends a request to the node itself: the client's own
	// routing would answer some requests from a refused Metadata or
	// FindCoordinator before sending them.
	direct := func(cl *kgo.Client) *kgo.Broker { return cl.Broker(int(brokers[0].NodeID)) }
	// topicMetadata is the node's Metadata answer for topic, to the
	// super user (the client caches Metadata answers).
	topicMetadata := func(topic string) kmsg.MetadataResponseTopic {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(c, direct(clients["admin"]))
		if err != nil || len(resp.Topics) != 1 {
			t.Fatalf("metadata of %s: %v", topic, err)
		}
		return resp.Topics[0]
	}
	builders := []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders-").ResourcePatternType(kadm.ACLPatternPrefixed).
			Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe, kadm.OpCreate, kadm.OpDelete),
		kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("g1").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").AllowHosts().TransactionalIDs("tx-a").Operations(kadm.OpWrite),
		kadm.NewACLs().Allow("User:carol").AllowHosts().Topics("payments").Operations(kadm.OpAll),
		kadm.NewACLs().Deny("User:carol").DenyHosts().Topics("payments").Operations(kadm.OpRead),
		// The binding the DeleteAcls row tries to delete.
		kadm.NewACLs().Allow("User:nobody").AllowHosts().Topics("zz-keep").Operations(kadm.OpRead),
	}
	for _, b := range builders {
		res, err := adm.CreateACLs(c, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs %+v: %v", r, r.Err)
			}
		}
	}
	commitGen := map[string]int64{"admin": 1, "alice": 2, "carol": 3, "bob": 4}

	// Helpers for the checks that a refused request did nothing.
	endOffset := func(topic string) int64 {
		ends, err := adm.ListEndOffsets(c, topic)
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup(topic, 0)
		return o.Offset
	}
	topicExists := func(topic string) bool { return topicMetadata(topic).ErrorCode == 0 }
	partitions := func(topic string) int { return len(topicMetadata(topic).Partitions) }
	aclCount := func(topic string) int {
		res, err := adm.DescribeACLs(c, kadm.NewACLs().Topics(topic).Allow().AllowHosts().Operations(kadm.OpAny))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range res {
			n += len(r.Described)
		}
		return n
	}
	fetch := func(topic string) func(context.Context, string, *kgo.Client) (string, error) {
		return func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.ReplicaState.ID, req.ReplicaState.Epoch = -1, -1, -1
			req.MaxBytes = 1 << 20
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = topic, td[topic].ID
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			req.Topics = append(req.Topics, ft)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return "", fmt.Errorf("fetch answer %+v", resp)
			}
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 && len(p.RecordBatches) != 0 {
				return "", fmt.Errorf("refused fetch carries %d bytes of records", len(p.RecordBatches))
			}
			return codeName(p.ErrorCode), nil
		}
	}
	produce := func(topic string) func(context.Context, string, *kgo.Client) (string, error) {
		return func(c context.Context, user string, cl *kgo.Client) (string, error) {
			before := endOffset(topic)
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 10000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = topic, td[topic].ID
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = oneRecordBatch([]byte(user))
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return "", fmt.Errorf("produce answer %+v", resp)
			}
			got := codeName(resp.Topics[0].Partitions[0].ErrorCode)
			if after := endOffset(topic); got != okCode && after != before {
				t.Errorf("%s's refused produce to %s appended: end offset %d -> %d", user, topic, before, after)
			}
			return got, nil
		}
	}
	metadataOf := func(topic string) func(context.Context, string, *kgo.Client) (string, error) {
		return func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, mt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 {
				return "", fmt.Errorf("metadata of %s: %d topics", topic, len(resp.Topics))
			}
			return codeName(resp.Topics[0].ErrorCode), nil
		}
	}
	configResource := func(typ kmsg.ConfigResourceType, name string) func(context.Context, string, *kgo.Client) (string, error) {
		return func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrDescribeConfigsRequest()
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = typ, name
			req.Resources = append(req.Resources, r)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Resources) != 1 {
				return "", fmt.Errorf("describe configs: %d resources", len(resp.Resources))
			}
			return codeName(resp.Resources[0].ErrorCode), nil
		}
	}
	alterConfig := func(typ kmsg.ConfigResourceType, name, key string, values map[string]string) func(context.Context, string, *kgo.Client) (string, error) {
		return func(c context.Context, user string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			r := kmsg.NewIncrementalAlterConfigsRequestResource()
			r.ResourceType, r.ResourceName = typ, name
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Value = key, kmsg.StringPtr(values[user])
			r.Configs = append(r.Configs, cfg)
			req.Resources = append(req.Resources, r)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Resources) != 1 {
				return "", fmt.Errorf("alter configs: %d resources", len(resp.Resources))
			}
			got := codeName(resp.Resources[0].ErrorCode)
			if got != okCode {
				var rc kadm.ResourceConfigs
				if typ == kmsg.ConfigResourceTypeTopic {
					rc, err = adm.DescribeTopicConfigs(c, name)
				} else {
					rc, err = adm.DescribeBrokerConfigs(c, brokers[0].NodeID)
				}
				if err != nil {
					return "", err
				}
				if v, err := rc.On(name, nil); err == nil {
					for _, cv := range v.Configs {
						if cv.Key == key && cv.MaybeValue() == values[user] {
							t.Errorf("%s's refused IncrementalAlterConfigs set %s=%s", user, key, values[user])
						}
					}
				}
			}
			return got, nil
		}
	}
	findCoordinator := func(typ int8, key string) func(context.Context, string, *kgo.Client) (string, error) {
		return func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType, req.CoordinatorKey, req.CoordinatorKeys = typ, key, []string{key}
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Coordinators) == 1 {
				return codeName(resp.Coordinators[0].ErrorCode), nil
			}
			return codeName(resp.ErrorCode), nil
		}
	}
	// initTxn initializes tx-a, waiting out CONCURRENT_TRANSACTIONS
	// while the previous owner's transaction is aborted.
	initTxn := func(c context.Context, cl *kgo.Client) (*kmsg.InitProducerIDResponse, error) {
		for {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID = kmsg.StringPtr("tx-a")
			req.TransactionTimeoutMillis = 60000
			req.ProducerID, req.ProducerEpoch = -1, -1
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil || resp.ErrorCode != kerr.ConcurrentTransactions.Code {
				return resp, err
			}
			select {
			case <-c.Done():
				return nil, c.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	var lastPID int64 = -1

	rows := []authzRow{
		{api: "Produce orders-1 (prefixed ALLOW)", want: [4]string{okCode, okCode, taf, taf}, run: produce("orders-1")},
		{api: "Produce payments (ALLOW ALL)", want: [4]string{okCode, taf, okCode, taf}, run: produce("payments")},
		{api: "Fetch orders-1", want: [4]string{okCode, okCode, taf, taf}, run: fetch("orders-1")},
		{api: "Fetch payments (DENY READ)", want: [4]string{okCode, taf, taf, taf}, run: fetch("payments")},
		{api: "ListOffsets payments", want: [4]string{okCode, taf, okCode, taf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "payments"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return "", fmt.Errorf("list offsets answer %+v", resp)
			}
			return codeName(resp.Topics[0].Partitions[0].ErrorCode), nil
		}},
		{api: "Metadata orders-1", want: [4]string{okCode, okCode, taf, taf}, run: metadataOf("orders-1")},
		{api: "Metadata payments", want: [4]string{okCode, taf, okCode, taf}, run: metadataOf("payments")},
		// Every topic: the list holds only the topics the principal may
		// DESCRIBE (shown: which of orders-1 and payments, or every name
		// when bob sees any).
		{api: "Metadata all topics", want: [4]string{"orders-1,payments", "orders-1", "payments", "none"}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			var seen []string
			for _, tp := range resp.Topics {
				if n := *tp.Topic; n == "orders-1" || n == "payments" || user == "bob" {
					seen = append(seen, n)
				}
			}
			if len(seen) == 0 {
				return "none", nil
			}
			slices.Sort(seen)
			return strings.Join(seen, ","), nil
		}},
		{api: "CreateTopics orders-c-<user>", want: [4]string{okCode, okCode, taf, taf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = 15000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "orders-c-"+user, 1, 1
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 {
				return "", fmt.Errorf("create topics answer %+v", resp)
			}
			got := codeName(resp.Topics[0].ErrorCode)
			if got != okCode && topicExists("orders-c-"+user) {
				t.Errorf("%s's refused CreateTopics created orders-c-%s", user, user)
			}
			return got, nil
		}},
		{api: "DeleteTopics orders-d-<user>", want: [4]string{okCode, okCode, taf, taf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TimeoutMillis = 15000
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr("orders-d-" + user)
			req.Topics = append(req.Topics, rt)
			req.TopicNames = []string{"orders-d-" + user}
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 {
				return "", fmt.Errorf("delete topics answer %+v", resp)
			}
			got := codeName(resp.Topics[0].ErrorCode)
			if got != okCode && !topicExists("orders-d-"+user) {
				t.Errorf("%s's refused DeleteTopics deleted orders-d-%s", user, user)
			}
			return got, nil
		}},
		{api: "CreatePartitions payments (+1)", want: [4]string{okCode, taf, okCode, taf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			before := partitions("payments")
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.TimeoutMillis = 15000
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = "payments", int32(before+1)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 {
				return "", fmt.Errorf("create partitions answer %+v", resp)
			}
			got := codeName(resp.Topics[0].ErrorCode)
			if got != okCode && partitions("payments") != before {
				t.Errorf("%s's refused CreatePartitions changed payments from %d partitions to %d", user, before, partitions("payments"))
			}
			return got, nil
		}},
		{api: "DescribeConfigs topic payments", want: [4]string{okCode, taf, okCode, taf}, run: configResource(kmsg.ConfigResourceTypeTopic, "payments")},
		{api: "DescribeConfigs broker", want: [4]string{okCode, caf, caf, caf}, run: configResource(kmsg.ConfigResourceTypeBroker, nodeID)},
		{api: "IncrementalAlterConfigs topic payments", want: [4]string{okCode, taf, okCode, taf},
			run: alterConfig(kmsg.ConfigResourceTypeTopic, "payments", "retention.ms",
				map[string]string{"admin": "86400001", "alice": "86400002", "carol": "86400003", "bob": "86400004"})},
		// Broker configs are static in sluice (INVALID_REQUEST once
		// authorized): only authorization is checked.
		{api: "IncrementalAlterConfigs broker", want: [4]string{notRefused, caf, caf, caf},
			run: alterConfig(kmsg.ConfigResourceTypeBroker, nodeID, "log.cleaner.backoff.ms",
				map[string]string{"admin": "15001", "alice": "15002", "carol": "15003", "bob": "15004"})},
		{api: "DeleteRecords payments before 0", want: [4]string{okCode, taf, okCode, taf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrDeleteRecordsRequest()
			req.TimeoutMillis = 15000
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = "payments"
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Offset = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return "", fmt.Errorf("delete records answer %+v", resp)
			}
			return codeName(resp.Topics[0].Partitions[0].ErrorCode), nil
		}},
		{api: "DescribeProducers orders-1", want: [4]string{okCode, okCode, taf, taf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrDescribeProducersRequest()
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = "orders-1", []int32{0}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return "", fmt.Errorf("describe producers answer %+v", resp)
			}
			return codeName(resp.Topics[0].Partitions[0].ErrorCode), nil
		}},
		// A simple (generation -1) commit of orders-1 in g1; each user
		// commits a different offset.
		{api: "OffsetCommit g1 orders-1", want: [4]string{okCode, okCode, gaf, gaf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrOffsetCommitRequest()
			req.Group, req.Generation = "g1", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = "orders-1", td["orders-1"].ID
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset, rp.LeaderEpoch = commitGen[user], -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return "", fmt.Errorf("offset commit answer %+v", resp)
			}
			got := codeName(resp.Topics[0].Partitions[0].ErrorCode)
			if got != okCode {
				offs, err := adm.FetchOffsets(c, "g1")
				if err != nil {
					return "", err
				}
				if o, ok := offs.Lookup("orders-1", 0); ok && o.At == commitGen[user] {
					t.Errorf("%s's refused OffsetCommit committed %d", user, o.At)
				}
			}
			return got, nil
		}},
		{api: "OffsetFetch g1", want: [4]string{okCode, okCode, gaf, gaf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Group = "g1"
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group = "g1"
			req.Groups = append(req.Groups, g)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Groups) == 1 {
				return codeName(resp.Groups[0].ErrorCode), nil
			}
			return codeName(resp.ErrorCode), nil
		}},
		{api: "FindCoordinator group g1", want: [4]string{okCode, okCode, gaf, gaf}, run: findCoordinator(0, "g1")},
		{api: "FindCoordinator transaction tx-a", want: [4]string{okCode, okCode, tiaf, tiaf}, run: findCoordinator(1, "tx-a")},
		// JoinGroup without a member id: an allowed member is told
		// MEMBER_ID_REQUIRED (KIP-394) and is not yet in the group.
		{api: "JoinGroup g1", want: [4]string{"MEMBER_ID_REQUIRED", "MEMBER_ID_REQUIRED", gaf, gaf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrJoinGroupRequest()
			req.Group, req.ProtocolType = "g1", "consumer"
			req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = "range", (&kmsg.ConsumerMemberMetadata{Topics: []string{"orders-1"}}).AppendTo(nil)
			req.Protocols = append(req.Protocols, p)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			return codeName(resp.ErrorCode), nil
		}},
		{api: "DescribeGroups g1", want: [4]string{okCode, okCode, gaf, gaf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = []string{"g1"}
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Groups) != 1 {
				return "", fmt.Errorf("describe groups answer %+v", resp)
			}
			return codeName(resp.Groups[0].ErrorCode), nil
		}},
		{api: "InitProducerId idempotent", want: [4]string{okCode, okCode, okCode, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.ProducerID, req.ProducerEpoch = -1, -1
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			return codeName(resp.ErrorCode), nil
		}},
		{api: "InitProducerId tx-a", want: [4]string{okCode, okCode, tiaf, tiaf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			resp, err := initTxn(c, cl)
			if err != nil {
				return "", err
			}
			if resp.ErrorCode == 0 {
				lastPID = resp.ProducerID
			}
			return codeName(resp.ErrorCode), nil
		}},
		// A permitted principal first gets tx-a's producer id and epoch;
		// the others send the last one known.
		{api: "AddPartitionsToTxn tx-a orders-1 (v3)", want: [4]string{okCode, okCode, tiaf, tiaf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			pid, epoch := lastPID, int16(0)
			if user == "admin" || user == "alice" {
				resp, err := initTxn(c, cl)
				if err != nil {
					return "", err
				}
				if resp.ErrorCode != 0 {
					return "", fmt.Errorf("InitProducerId tx-a: %s", codeName(resp.ErrorCode))
				}
				pid, epoch = resp.ProducerID, resp.ProducerEpoch
			}
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx-a", pid, epoch
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = "orders-1", []int32{0}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return "", fmt.Errorf("add partitions answer %+v", resp)
			}
			return codeName(resp.Topics[0].Partitions[0].ErrorCode), nil
		}},
		{api: "DescribeTransactions tx-a", want: [4]string{okCode, okCode, tiaf, tiaf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrDescribeTransactionsRequest()
			req.TransactionalIDs = []string{"tx-a"}
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.TransactionStates) != 1 {
				return "", fmt.Errorf("describe transactions answer %+v", resp)
			}
			return codeName(resp.TransactionStates[0].ErrorCode), nil
		}},
		// ListTransactions lists only the transactional ids the
		// principal may DESCRIBE.
		{api: "ListTransactions", want: [4]string{"tx-a", "tx-a", "none", "none"}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			resp, err := kmsg.NewPtrListTransactionsRequest().RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if resp.ErrorCode != 0 {
				return codeName(resp.ErrorCode), nil
			}
			var ids []string
			for _, s := range resp.TransactionStates {
				ids = append(ids, s.TransactionalID)
			}
			if len(ids) == 0 {
				return "none", nil
			}
			slices.Sort(ids)
			return strings.Join(ids, ","), nil
		}},
		{api: "DescribeAcls", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			err := describeErr(c, kadm.NewClient(cl))
			return errName(err)
		}},
		{api: "CreateAcls zz-<user>", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			res, err := kadm.NewClient(cl).CreateACLs(c, kadm.NewACLs().Allow("User:nobody").AllowHosts().Topics("zz-"+user).Operations(kadm.OpRead))
			if err != nil {
				return errName(err)
			}
			if len(res) != 1 {
				return "", fmt.Errorf("create acls answer %+v", res)
			}
			got, err := errName(res[0].Err)
			if err == nil && got != okCode && aclCount("zz-"+user) != 0 {
				t.Errorf("%s's refused CreateAcls created a binding", user)
			}
			return got, err
		}},
		{api: "DeleteAcls zz-keep", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			res, err := kadm.NewClient(cl).DeleteACLs(c, kadm.NewACLs().Allow("User:nobody").AllowHosts().Topics("zz-keep").Operations(kadm.OpRead))
			if err != nil {
				return errName(err)
			}
			if len(res) != 1 {
				return "", fmt.Errorf("delete acls answer %+v", res)
			}
			got, err := errName(res[0].Err)
			if err == nil && got != okCode && aclCount("zz-keep") != 1 {
				t.Errorf("%s's refused DeleteAcls deleted the binding", user)
			}
			return got, err
		}},
		{api: "DescribeCluster", want: [4]string{okCode, okCode, okCode, okCode}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			return codeName(resp.ErrorCode), nil
		}},
		// The preferred leader already leads: only authorization is
		// checked.
		{api: "ElectLeaders orders-1", want: [4]string{notRefused, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrElectLeadersRequest()
			req.TimeoutMillis = 15000
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = "orders-1", []int32{0}
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return codeName(resp.ErrorCode), nil
			}
			return codeName(resp.Topics[0].Partitions[0].ErrorCode), nil
		}},
		// Cancelling a reassignment there is none of: only authorization
		// is checked.
		{api: "AlterPartitionReassignments orders-1", want: [4]string{notRefused, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			req.TimeoutMillis = 15000
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = "orders-1"
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return codeName(resp.ErrorCode), nil
			}
			return codeName(resp.Topics[0].Partitions[0].ErrorCode), nil
		}},
		{api: "ListPartitionReassignments", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrListPartitionReassignmentsRequest()
			req.TimeoutMillis = 15000
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			return codeName(resp.ErrorCode), nil
		}},
		{api: "DescribeClientQuotas", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			resp, err := kmsg.NewPtrDescribeClientQuotasRequest().RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			return codeName(resp.ErrorCode), nil
		}},
		{api: "AlterClientQuotas (validate only)", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrAlterClientQuotasRequest()
			req.ValidateOnly = true
			e := kmsg.NewAlterClientQuotasRequestEntry()
			ec := kmsg.NewAlterClientQuotasRequestEntryEntity()
			ec.Type, ec.Name = "user", kmsg.StringPtr("nobody")
			e.Entity = append(e.Entity, ec)
			op := kmsg.NewAlterClientQuotasRequestEntryOp()
			op.Key, op.Value = "producer_byte_rate", 1024
			e.Ops = append(e.Ops, op)
			req.Entries = append(req.Entries, e)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Entries) != 1 {
				return "", fmt.Errorf("alter client quotas answer %+v", resp)
			}
			return codeName(resp.Entries[0].ErrorCode), nil
		}},
		{api: "DescribeUserScramCredentials", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			resp, err := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest().RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			return codeName(resp.ErrorCode), nil
		}},
		{api: "AlterUserScramCredentials scram-<user>", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			res, err := kadm.NewClient(cl).AlterUserSCRAMs(c, nil, []kadm.UpsertSCRAM{{User: "scram-" + user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw"}})
			if err != nil {
				return errName(err)
			}
			r, ok := res["scram-"+user]
			if !ok {
				return "", fmt.Errorf("alter scram answer %+v", res)
			}
			got, err := errName(r.Err)
			if err == nil && got != okCode {
				d, derr := adm.DescribeUserSCRAMs(c, "scram-"+user)
				if derr == nil && len(d["scram-"+user].CredInfos) != 0 {
					t.Errorf("%s's refused AlterUserScramCredentials created a credential", user)
				}
			}
			return got, err
		}},
		// No such feature: only authorization is checked.
		{api: "UpdateFeatures (validate only)", want: [4]string{notRefused, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrUpdateFeaturesRequest()
			req.TimeoutMillis, req.ValidateOnly = 15000, true
			f := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
			f.Feature, f.MaxVersionLevel, f.UpgradeType = "sluice.test.feature", 1, 1
			req.FeatureUpdates = append(req.FeatureUpdates, f)
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if resp.ErrorCode != 0 || len(resp.Results) != 1 {
				return codeName(resp.ErrorCode), nil
			}
			return codeName(resp.Results[0].ErrorCode), nil
		}},
		{api: "DescribeLogDirs", want: [4]string{okCode, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			resp, err := kmsg.NewPtrDescribeLogDirsRequest().RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			return codeName(resp.ErrorCode), nil
		}},
		// There is no broker 99: only authorization is checked.
		{api: "UnregisterBroker 99", want: [4]string{notRefused, caf, caf, caf}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrUnregisterBrokerRequest()
			req.BrokerID = 99
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			return codeName(resp.ErrorCode), nil
		}},
		// ListGroups lists only the groups the principal may DESCRIBE.
		{api: "ListGroups", want: [4]string{"g1", "g1", "none", "none"}, run: func(c context.Context, _ string, cl *kgo.Client) (string, error) {
			resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if resp.ErrorCode != 0 {
				return codeName(resp.ErrorCode), nil
			}
			var ids []string
			for _, g := range resp.Groups {
				ids = append(ids, g.Group)
			}
			if len(ids) == 0 {
				return "none", nil
			}
			slices.Sort(ids)
			return strings.Join(ids, ","), nil
		}},
		// Last: admin deletes g1 after the refused principals tried.
		{api: "DeleteGroups g1", want: [4]string{okCode, gaf, gaf, gaf}, run: func(c context.Context, user string, cl *kgo.Client) (string, error) {
			req := kmsg.NewPtrDeleteGroupsRequest()
			req.Groups = []string{"g1"}
			resp, err := req.RequestWith(c, direct(cl))
			if err != nil {
				return "", err
			}
			if len(resp.Groups) != 1 {
				return "", fmt.Errorf("delete groups answer %+v", resp)
			}
			got := codeName(resp.Groups[0].ErrorCode)
			if got != okCode {
				offs, err := adm.FetchOffsets(c, "g1")
				if err != nil {
					return "", err
				}
				if _, ok := offs.Lookup("orders-1", 0); !ok {
					t.Errorf("%s's refused DeleteGroups deleted g1's offsets", user)
				}
			}
			return got, nil
		}},
	}

	// The refused principals go first, so that a request the super user
	// carries out (DeleteGroups, DeleteAcls) cannot hide a refused one
	// that acted.
	order := []int{3, 2, 1, 0}
	t.Logf("%-40s | %-24s | %-24s | %-24s | %-24s", "API", authzUsers[0], authzUsers[1], authzUsers[2], authzUsers[3])
	for _, row := range rows {
		var cells [4]string
		for _, i := range order {
			user := authzUsers[i]
			rc, cancel := context.WithTimeout(c, 30*time.Second)
			got, err := row.run(rc, user, clients[user])
			cancel()
			want := row.want[i]
			switch {
			case err != nil:
				cells[i] = "error"
				t.Errorf("%s as %s: %v, want %s", row.api, user, err, want)
			case want == notRefused && strings.HasSuffix(got, "_AUTHORIZATION_FAILED"),
				want != notRefused && got != want:
				cells[i] = "MISMATCH " + got
				t.Errorf("%s as %s: got %s, want %s", row.api, user, got, want)
			case want == notRefused:
				cells[i] = "allowed (" + got + ")"
			default:
				cells[i] = got
			}
		}
		t.Logf("%-40s | %-24s | %-24s | %-24s | %-24s", row.api, cells[0], cells[1], cells[2], cells[3])
	}

	// A wrong password: the SASL handshake fails, no request is served.
	err = authErr(t, saslAddr, plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism())
	t.Logf("%-40s | %s", "Metadata with a wrong password", fmt.Sprint(err))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("Metadata with a wrong password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// oneRecordBatch is a v2 record batch (magic 2, uncompressed, no
// producer id) holding one record of value.
func oneRecordBatch(value []byte) []byte {
	rec := kmsg.Record{Value: value, OffsetDelta: 0}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // less the 1-byte varint of 0
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1,
		Records: rec.AppendTo(nil),
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
