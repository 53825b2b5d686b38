package handler_test

import (
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/clock"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/txn"
)

var txnProps = map[string]string{"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}

// TestTxnEndToEnd: a franz-go transactional producer over TCP commits one
// transaction and aborts another; the coordinator writes the markers
// through WriteTxnMarkers to itself; a read_committed consumer sees only
// the committed records, a read_uncommitted one sees both.
func TestTxnEndToEnd(t *testing.T) {
	n := startNode(t, "", txnProps)
	if err := n.b.CreateTopic("txe", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	p := n.client(kgo.TransactionalID("tx-e2e"), kgo.DefaultProduceTopic("txe"))
	run := func(commit kgo.TransactionEndTry, vals ...string) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.EndTransaction(ctx(t), commit); err != nil {
			t.Fatal(err)
		}
	}
	run(kgo.TryCommit, "c1", "c2")
	run(kgo.TryAbort, "a1")
	run(kgo.TryCommit, "c3")

	committed := consumeIso(t, n, "txe", true)
	if want := []string{"c1", "c2", "c3"}; !equalStrings(committed, want) {
		t.Fatalf("read_committed = %v, want %v", committed, want)
	}
	all := consumeIso(t, n, "txe", false)
	sort.Strings(all)
	if want := []string{"a1", "c1", "c2", "c3"}; !equalStrings(all, want) {
		t.Fatalf("read_uncommitted = %v, want %v", all, want)
	}
	m, ok := n.h.Transactions().Describe("tx-e2e")
	if !ok || m.State != txn.CompleteCommit {
		t.Fatalf("coordinator state: %+v", m)
	}
}

// TestTxnRequestErrors: the coordinator's answers to raw requests, per
// version (FindCoordinator key type 1, INVALID_PRODUCER_EPOCH for old
// versions, UNKNOWN_TOPIC_OR_PARTITION with OPERATION_NOT_ATTEMPTED,
// VerifyOnly).
func TestTxnRequestErrors(t *testing.T) {
	n := startNode(t, "", txnProps)
	if err := n.b.CreateTopic("te", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl := n.client()
	// Requests at an exact version go through sluice's own client (kgo
	// picks the highest version both sides know).
	raw := protocol.NewClient(n.addr, "txn-test")
	t.Cleanup(func() { raw.Close() })
	at := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := raw.Request(ctx(t), req)
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		return resp
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKey = 1, "tx"
	if r := request[*kmsg.FindCoordinatorResponse](t, cl, fc); r.ErrorCode != 0 || r.NodeID != n.b.NodeID() {
		t.Fatalf("find coordinator: %+v", r)
	}
	if st := n.b.Image().Topics[txn.Topic]; st == nil || len(st.Partitions) != 3 ||
		st.Configs["cleanup.policy"] != "compact" || st.Configs["min.insync.replicas"] != "1" {
		t.Fatalf("__transaction_state: %+v", st)
	}

	id := "tx"
	var pid int64
	for {
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
		r := request[*kmsg.InitProducerIDResponse](t, cl, ip)
		if r.ErrorCode == kerr.CoordinatorLoadInProgress.Code {
			continue
		}
		if r.ErrorCode != 0 || r.ProducerEpoch != 0 {
			t.Fatalf("init: %+v", r)
		}
		pid = r.ProducerID
		break
	}
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 1<<30
	if r := request[*kmsg.InitProducerIDResponse](t, cl, ip); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("timeout: %+v", r)
	}

	add := func(version int16, epoch int16, topic string, parts ...int32) map[int32]int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = version
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, parts
		req.Topics = append(req.Topics, rt)
		out := map[int32]int16{}
		for _, p := range at(req).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions {
			out[p.Partition] = p.ErrorCode
		}
		return out
	}
	if c := add(3, 0, "te", 0, 5); c[0] != kerr.OperationNotAttempted.Code || c[5] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %v", c)
	}
	if c := add(1, 3, "te", 0); c[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("v1 fenced: %v", c)
	}
	if c := add(3, 3, "te", 0); c[0] != kerr.ProducerFenced.Code {
		t.Fatalf("v3 fenced: %v", c)
	}
	if c := add(3, 0, "te", 0); c[0] != 0 {
		t.Fatalf("add: %v", c)
	}

	// The brokers' form: verification adds nothing.
	vr := kmsg.NewPtrAddPartitionsToTxnRequest()
	vr.Version = 4
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = id, pid, 0, true
	tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	tt.Topic, tt.Partitions = "te", []int32{0, 1}
	tr.Topics = append(tr.Topics, tt)
	vr.Transactions = append(vr.Transactions, tr)
	vresp := request[*kmsg.AddPartitionsToTxnResponse](t, cl, vr)
	got := vresp.Transactions[0].Topics[0].Partitions
	if vresp.ErrorCode != 0 || got[0].ErrorCode != 0 || got[1].ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("verify: %+v", vresp)
	}

	end := func(version int16, epoch int16, commit bool) *kmsg.EndTxnResponse {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = version
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
		return at(req).(*kmsg.EndTxnResponse)
	}
	if r := end(1, 7, true); r.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("v1 fenced end: %+v", r)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, pid, 0, "g"
	if r := request[*kmsg.AddOffsetsToTxnResponse](t, cl, ao); r.ErrorCode != 0 {
		t.Fatalf("add offsets: %+v", r)
	}
	if m, _ := n.h.Transactions().Describe(id); len(m.Partitions) != 2 {
		t.Fatalf("partitions: %v", m.Partitions)
	}
	// v5 (transaction version 2) bumps the epoch at the end.
	if r := end(5, 0, false); r.ErrorCode != 0 || r.ProducerID != pid || r.ProducerEpoch != 1 {
		t.Fatalf("v5 end: %+v", r)
	}
}

// TestTxnACLs: the transaction APIs check what Kafka's KafkaApis checks:
// WRITE on the transactional id (DESCRIBE for FindCoordinator), WRITE on
// each topic of AddPartitionsToTxn (the others then OPERATION_NOT_ATTEMPTED)
// and READ on the group of AddOffsetsToTxn.
func TestTxnACLs(t *testing.T) {
	n := startNode(t, "", map[string]string{"authorizer.class.name": standardAuthorizer,
		"allow.everyone.if.no.acl.found":       "true",
		"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"})
	if err := n.b.CreateTopic("open", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := n.b.CreateTopic("secret", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl := n.client()
	deny := func(rt kmsg.ACLResourceType, name string) kmsg.CreateACLsRequestCreation {
		c := creation(rt, name, kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", kmsg.ACLOperationAll)
		c.PermissionType = kmsg.ACLPermissionTypeDeny
		return c
	}
	creq := kmsg.NewPtrCreateACLsRequest()
	creq.Creations = []kmsg.CreateACLsRequestCreation{
		deny(kmsg.ACLResourceTypeTransactionalId, "denied"),
		deny(kmsg.ACLResourceTypeTopic, "secret"),
		deny(kmsg.ACLResourceTypeGroup, "gdeny"),
	}
	for _, r := range request[*kmsg.CreateACLsResponse](t, cl, creq).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create acls: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
	denied := kerr.TransactionalIDAuthorizationFailed.Code
	// Straight to this node: kgo would look for the coordinator first.
	raw := protocol.NewClient(n.addr, "txn-acl-test")
	t.Cleanup(func() { raw.Close() })
	at := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := raw.Request(ctx(t), req)
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		return resp
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.Version, fc.CoordinatorType, fc.CoordinatorKey = 3, 1, "denied"
	if r := at(fc).(*kmsg.FindCoordinatorResponse); r.ErrorCode != denied {
		t.Fatalf("find coordinator: %+v", r)
	}
	did := "denied"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &did, 60000
	if r := at(ip).(*kmsg.InitProducerIDResponse); r.ErrorCode != denied {
		t.Fatalf("init: %+v", r)
	}
	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID = "denied"
	if r := at(et).(*kmsg.EndTxnResponse); r.ErrorCode != denied {
		t.Fatalf("end: %+v", r)
	}

	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID = "ok"
	for _, topic := range []string{"open", "secret"} {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		ap.Topics = append(ap.Topics, rt)
	}
	resp := at(ap).(*kmsg.AddPartitionsToTxnResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["open"] != kerr.OperationNotAttempted.Code || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("add partitions: %v", codes)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.Group = "ok", "gdeny"
	if r := at(ao).(*kmsg.AddOffsetsToTxnResponse); r.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("add offsets: %+v", r)
	}
}

// TestTxnTimeoutEndToEnd: a transaction left open past its
// transaction.timeout.ms is aborted by the coordinator at a bumped epoch;
// the franz-go producer's commit then fails with PRODUCER_FENCED (Kafka's
// answer at EndTxn v2+ for transaction version 1, fatal for the client); a
// new instance with the same transactional id commits; the timed-out
// records are never read committed.
func TestTxnTimeoutEndToEnd(t *testing.T) {
	props := map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"}
	for k, v := range txnProps {
		props[k] = v
	}
	clk := clock.NewManual(time.Now())
	n := startNodeClock(t, "", props, clk)
	if err := n.b.CreateTopic("tto", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	producer := func() *kgo.Client {
		return n.client(kgo.TransactionalID("tx-timeout"), kgo.DefaultProduceTopic("tto"),
			kgo.TransactionTimeout(500*time.Millisecond))
	}
	p := producer()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The coordinator's abort check runs on the broker's manual clock, on
	// the goroutine that moves it: at 500 ms the transaction is not past
	// its timeout yet; at the check after, it is.
	clk.Advance(500 * time.Millisecond)
	if m, _ := n.h.Transactions().Describe("tx-timeout"); m.State != txn.Ongoing || m.Pending() != nil {
		t.Fatalf("at its timeout, not past it: %+v", m)
	}
	clk.Advance(100 * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		m, _ := n.h.Transactions().Describe("tx-timeout")
		if m.State == txn.CompleteAbort {
			if m.Epoch != 1 {
				t.Fatalf("timeout abort at epoch %d", m.Epoch)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not aborted after its timeout: %+v", m)
		}
	}
	if err := p.EndTransaction(ctx(t), kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("commit after the timeout: %v", err)
	}
	p.Close()
	p = producer()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx(t), &kgo.Record{Value: []byte("next")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := p.EndTransaction(ctx(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if got := consumeIso(t, n, "tto", true); !equalStrings(got, []string{"next"}) {
		t.Fatalf("read_committed = %v", got)
	}
}

// TestTxnConsumeTransformProduce: franz-go's GroupTransactSession reads a
// topic in a consumer group and writes what it read to another in one
// transaction with the group's offsets (AddOffsetsToTxn, TxnOffsetCommit,
// markers to __consumer_offsets too): once committed, read_committed sees
// the output and the group's committed offset is past the input.
func TestTxnConsumeTransformProduce(t *testing.T) {
	n := startNode(t, "", map[string]string{"transaction.state.log.num.partitions": "3",
		"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"})
	for _, topic := range []string{"in", "out"} {
		if err := n.b.CreateTopic(topic, 1, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	src := n.client(kgo.DefaultProduceTopic("in"))
	for _, v := range []string{"x", "y", "z"} {
		if err := src.ProduceSync(ctx(t), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(n.addr), kgo.TransactionalID("tx-ctp"),
		kgo.ConsumerGroup("ctp"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Begin(); err != nil {
		t.Fatal(err)
	}
	read := 0
	for read < 3 {
		fs := sess.PollFetches(ctx(t))
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatalf("poll: %v", errs)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			sess.Produce(ctx(t), &kgo.Record{Value: append([]byte("t-"), r.Value...)}, nil)
		})
	}
	committed, err := sess.End(ctx(t), kgo.TryCommit)
	if err != nil || !committed {
		t.Fatalf("end: committed %v, %v", committed, err)
	}
	if got := consumeIso(t, n, "out", true); !equalStrings(got, []string{"t-x", "t-y", "t-z"}) {
		t.Fatalf("read_committed out = %v", got)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = "ctp"
	of.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "in", Partitions: []int32{0}}}
	for i := 0; ; i++ {
		resp := request[*kmsg.OffsetFetchResponse](t, n.client(), of)
		if len(resp.Topics) == 1 && resp.Topics[0].Partitions[0].Offset == 3 {
			break
		}
		if i == 100 {
			t.Fatalf("committed offset: %+v", resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTxnDescribeAndList: DescribeTransactions and ListTransactions report
// an ongoing transaction and then its completion, with ListTransactions'
// filters.
func TestTxnDescribeAndList(t *testing.T) {
	n := startNode(t, "", txnProps)
	if err := n.b.CreateTopic("dl", 2, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	p := n.client(kgo.TransactionalID("tx-dl"), kgo.DefaultProduceTopic("dl"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx(t), &kgo.Record{Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := n.client()
	dr := kmsg.NewPtrDescribeTransactionsRequest()
	dr.TransactionalIDs = []string{"tx-dl", "nope"}
	d := request[*kmsg.DescribeTransactionsResponse](t, cl, dr)
	if len(d.TransactionStates) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	st := d.TransactionStates[0]
	if st.TransactionalID != "nope" {
		st = d.TransactionStates[1]
	}
	if st.ErrorCode != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("unknown id: %+v", st)
	}
	for _, st := range d.TransactionStates {
		if st.TransactionalID == "tx-dl" && (st.ErrorCode != 0 || st.State != "Ongoing" || st.StartTimestamp < 0 ||
			len(st.Topics) != 1 || st.Topics[0].Topic != "dl" || st.Topics[0].Partitions[0] != 1) {
			t.Fatalf("ongoing: %+v", st)
		}
	}
	list := func(states ...string) *kmsg.ListTransactionsResponse {
		req := kmsg.NewPtrListTransactionsRequest()
		req.StateFilters = states
		req.DurationFilterMillis = -1
		return request[*kmsg.ListTransactionsResponse](t, cl, req)
	}
	if l := list("Ongoing"); l.ErrorCode != 0 || len(l.TransactionStates) != 1 || l.TransactionStates[0].TransactionalID != "tx-dl" {
		t.Fatalf("list ongoing: %+v", l)
	}
	if l := list("Bogus"); len(l.UnknownStateFilters) != 1 || len(l.TransactionStates) != 0 {
		t.Fatalf("list unknown state: %+v", l)
	}
	if err := p.EndTransaction(ctx(t), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		l := list("CompleteCommit")
		if len(l.TransactionStates) == 1 {
			break
		}
		if i == 200 {
			t.Fatalf("list complete: %+v", l)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l := list("Ongoing"); len(l.TransactionStates) != 0 {
		t.Fatalf("still ongoing: %+v", l)
	}
}

// TestListTransactionsPattern: ListTransactions v2's transactional id
// pattern (KIP-1152) must match the whole id; null or empty lists every
// id, and a pattern that does not compile is INVALID_REGULAR_EXPRESSION.
func TestListTransactionsPattern(t *testing.T) {
	n := startNode(t, "", txnProps)
	cl := n.client()
	for _, id := range []string{"orders-1", "orders-2", "payments-1"} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr(id), 60000
		if r := request[*kmsg.InitProducerIDResponse](t, cl, req); r.ErrorCode != 0 {
			t.Fatalf("init %s: %v", id, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(66, 1)
	cl1 := n.client(kgo.MaxVersions(v1))
	list := func(version int16, pattern *string) ([]string, int16) {
		req := kmsg.NewPtrListTransactionsRequest()
		req.DurationFilterMillis, req.TransactionalIDPattern = -1, pattern
		c := cl
		if version == 1 {
			c = cl1
		}
		r := request[*kmsg.ListTransactionsResponse](t, c, req)
		var ids []string
		for _, st := range r.TransactionStates {
			ids = append(ids, st.TransactionalID)
		}
		slices.Sort(ids)
		return ids, r.ErrorCode
	}
	for _, c := range []struct {
		pattern *string
		want    []string
	}{
		{nil, []string{"orders-1", "orders-2", "payments-1"}},
		{kmsg.StringPtr(""), []string{"orders-1", "orders-2", "payments-1"}},
		{kmsg.StringPtr("orders-.*"), []string{"orders-1", "orders-2"}},
		{kmsg.StringPtr("orders"), nil}, // the whole id must match
		{kmsg.StringPtr(".*-1"), []string{"orders-1", "payments-1"}},
		{kmsg.StringPtr("pay|orders-2"), []string{"orders-2"}},
	} {
		ids, code := list(2, c.pattern)
		if code != 0 || !slices.Equal(ids, c.want) {
			t.Errorf("pattern %v: %v (error %d), want %v", describePattern(c.pattern), ids, code, c.want)
		}
	}
	if ids, code := list(2, kmsg.StringPtr("orders-(")); code != kerr.InvalidRegularExpression.Code || len(ids) != 0 {
		t.Errorf("bad pattern: %v, error %d", ids, code)
	}
	if ids, code := list(2, kmsg.StringPtr(strings.Repeat("a", 40000))); code != kerr.InvalidRegularExpression.Code || len(ids) != 0 {
		t.Errorf("oversized pattern: %v, error %d", ids, code)
	}
	// v1 has no pattern field: the pattern is not sent, every id is listed.
	if ids, code := list(1, kmsg.StringPtr("orders-.*")); code != 0 || len(ids) != 3 {
		t.Errorf("v1: %v, error %d", ids, code)
	}
}

func describePattern(p *string) string {
	if p == nil {
		return "null"
	}
	return strconv.Quote(*p)
}
