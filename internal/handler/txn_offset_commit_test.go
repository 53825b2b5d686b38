package handler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-io/sluice/internal/group"
)

// txnOffset is one partition of a TxnOffsetCommit.
type txnOffset struct {
	topic     string
	partition int32
	offset    int64
	metadata  string
}

func txnOffsetReq(txnID, grp string, pid int64, epoch int16, gen int32, member string, instance *string, offs ...txnOffset) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group = txnID, grp
	req.ProducerID, req.ProducerEpoch = pid, epoch
	req.Generation, req.MemberID, req.InstanceID = gen, member, instance
	for _, o := range offs {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = o.topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = o.partition, o.offset
		md := o.metadata
		rp.Metadata = &md
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// txnCodes sends req to the node (no coordinator lookup) with cl, retrying
// while the coordinator loads, and returns the error code of each
// topic/partition.
func txnCodes(t *testing.T, n *node, cl *kgo.Client, req *kmsg.TxnOffsetCommitRequest) map[string]int16 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := cl.Broker(int(n.b.NodeID())).Request(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int16{}
		retry := false
		for _, rt := range r.(*kmsg.TxnOffsetCommitResponse).Topics {
			for _, rp := range rt.Partitions {
				out[fmt.Sprintf("%s-%d", rt.Topic, rp.Partition)] = rp.ErrorCode
				retry = retry || rp.ErrorCode == kerr.CoordinatorNotAvailable.Code || rp.ErrorCode == kerr.CoordinatorLoadInProgress.Code
			}
		}
		if !retry || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pinned returns a client that sends API key at most at version v.
func pinned(n *node, key, v int16) *kgo.Client {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(key, v)
	return n.client(kgo.MaxVersions(vs))
}

// fetchStable fetches t-0 of grp with OffsetFetch at version v (7 or 8)
// and RequireStable: offset and partition error.
func fetchStable(t *testing.T, n *node, grp string, v int16, stable bool) (int64, int16) {
	t.Helper()
	cl := pinned(n, 9, v)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = stable
	if v >= 8 {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = grp
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
		req.Groups = append(req.Groups, rg)
		resp := request[*kmsg.OffsetFetchResponse](t, cl, req)
		if resp.Version != v || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("OffsetFetch v%d: version %d, %v", v, resp.Version, kerr.ErrorForCode(resp.Groups[0].ErrorCode))
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	req.Group = grp
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp := request[*kmsg.OffsetFetchResponse](t, cl, req)
	if resp.Version != v || resp.ErrorCode != 0 {
		t.Fatalf("OffsetFetch v%d: version %d, %v", v, resp.Version, kerr.ErrorForCode(resp.ErrorCode))
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// offsetsMarker sends WriteTxnMarkers for pid to grp's partition of
// __consumer_offsets (groupProps: 5 partitions).
func offsetsMarker(t *testing.T, cl *kgo.Client, grp string, pid int64, epoch int16, commit bool) int16 {
	t.Helper()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed = pid, epoch, commit
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = group.OffsetsTopic, []int32{group.PartitionFor(grp, 5)}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return request[*kmsg.WriteTxnMarkersResponse](t, cl, req).Markers[0].Topics[0].Partitions[0].ErrorCode
}

// TestTxnOffsetCommit drives TxnOffsetCommit over TCP: authorization,
// per-partition errors, KIP-447 member checks, producer epoch fencing,
// and OffsetFetch's RequireStable before and after the transaction's
// marker.
func TestTxnOffsetCommit(t *testing.T) {
	// Producer ids here are made up, with no transaction coordinator
	// behind them: transaction version 1, where TxnOffsetCommit does not
	// add the partition to a transaction itself.
	props := map[string]string{"authorizer.class.name": standardAuthorizer, "allow.everyone.if.no.acl.found": "true",
		"sluice.transaction.version": "1"}
	for k, v := range groupProps {
		props[k] = v
	}
	n := startNode(t, "", props)
	cl := n.client()
	createTopic(t, cl, "t", 2, nil)
	createTopic(t, cl, "secret", 1, nil)
	deny := func(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kmsg.CreateACLsRequestCreation {
		c := creation(rt, name, kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", op)
		c.PermissionType = kmsg.ACLPermissionTypeDeny
		return c
	}
	acls := kmsg.NewPtrCreateACLsRequest()
	acls.Creations = []kmsg.CreateACLsRequestCreation{
		deny(kmsg.ACLResourceTypeTransactionalId, "denied-tx", kmsg.ACLOperationWrite),
		deny(kmsg.ACLResourceTypeGroup, "denied-g", kmsg.ACLOperationRead),
		deny(kmsg.ACLResourceTypeTopic, "secret", kmsg.ACLOperationRead),
	}
	for _, r := range request[*kmsg.CreateACLsResponse](t, cl, acls).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create ACLs: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}

	codes := txnCodes(t, n, cl, txnOffsetReq("tx", "tg", 1, 0, -1, "", nil,
		txnOffset{"t", 0, 7, "m"}, txnOffset{"t", 1, 8, strings.Repeat("x", 5000)}, txnOffset{"t", 9, 1, ""},
		txnOffset{"nope", 0, 1, ""}, txnOffset{"secret", 0, 1, ""}))
	wantCode(t, "commit", codes["t-0"], nil)
	wantCode(t, "metadata too large", codes["t-1"], kerr.OffsetMetadataTooLarge)
	wantCode(t, "missing partition", codes["t-9"], kerr.UnknownTopicOrPartition)
	wantCode(t, "missing topic", codes["nope-0"], kerr.UnknownTopicOrPartition)
	wantCode(t, "denied topic", codes["secret-0"], kerr.TopicAuthorizationFailed)

	// Pending until the transaction ends.
	for _, v := range []int16{7, 8} {
		o, code := fetchStable(t, n, "tg", v, true)
		if o != -1 || code != kerr.UnstableOffsetCommit.Code {
			t.Errorf("v%d RequireStable with a pending offset: %d %v", v, o, kerr.ErrorForCode(code))
		}
		if o, code := fetchStable(t, n, "tg", v, false); o != -1 || code != 0 {
			t.Errorf("v%d without RequireStable: %d %v", v, o, kerr.ErrorForCode(code))
		}
	}
	// The transaction coordinator's COMMIT marker on the group's offsets
	// partition ends it (WriteTxnMarkers -> Coordinator.CompleteTxn).
	wantCode(t, "commit marker", offsetsMarker(t, cl, "tg", 1, 0, true), nil)
	for _, v := range []int16{7, 8} {
		if o, code := fetchStable(t, n, "tg", v, true); o != 7 || code != 0 {
			t.Errorf("v%d after the commit: %d %v", v, o, kerr.ErrorForCode(code))
		}
	}

	// Authorization of the transactional id and the group.
	codes = txnCodes(t, n, cl, txnOffsetReq("denied-tx", "tg", 1, 0, -1, "", nil, txnOffset{"t", 0, 9, ""}, txnOffset{"secret", 0, 1, ""}))
	wantCode(t, "denied transactional id", codes["t-0"], kerr.TransactionalIDAuthorizationFailed)
	wantCode(t, "denied transactional id, denied topic", codes["secret-0"], kerr.TransactionalIDAuthorizationFailed)
	codes = txnCodes(t, n, cl, txnOffsetReq("tx", "denied-g", 1, 0, -1, "", nil, txnOffset{"t", 0, 9, ""}))
	wantCode(t, "denied group", codes["t-0"], kerr.GroupAuthorizationFailed)
	codes = txnCodes(t, n, cl, txnOffsetReq("tx", "", 1, 0, -1, "", nil, txnOffset{"t", 0, 9, ""}))
	wantCode(t, "empty group id", codes["t-0"], kerr.InvalidGroupID)

	// Producer epochs: an older one than the partition has seen is fenced.
	codes = txnCodes(t, n, cl, txnOffsetReq("tx", "tg", 1, 3, -1, "", nil, txnOffset{"t", 0, 10, ""}))
	wantCode(t, "newer epoch", codes["t-0"], nil)
	codes = txnCodes(t, n, cl, txnOffsetReq("tx", "tg", 1, 2, -1, "", nil, txnOffset{"t", 0, 11, ""}))
	wantCode(t, "older epoch", codes["t-0"], kerr.InvalidProducerEpoch)
	wantCode(t, "abort marker", offsetsMarker(t, cl, "tg", 1, 3, false), nil)
	if o, code := fetchStable(t, n, "tg", 7, true); o != 7 || code != 0 {
		t.Errorf("after the abort: %d %v", o, kerr.ErrorForCode(code))
	}

	// KIP-447: the member fields of v3+ are checked against the group.
	a := join(t, cl, "kg", "t")
	for _, tc := range []struct {
		name   string
		gen    int32
		member string
		want   *kerr.Error
	}{
		{"member", a.Generation, a.MemberID, nil},
		{"stale generation", a.Generation - 1, a.MemberID, kerr.IllegalGeneration},
		{"unknown member", a.Generation, "nobody", kerr.UnknownMemberID},
	} {
		codes = txnCodes(t, n, cl, txnOffsetReq("tx", "kg", 2, 0, tc.gen, tc.member, nil, txnOffset{"t", 0, 3, ""}))
		wantCode(t, tc.name, codes["t-0"], tc.want)
	}
	inst := "static-1"
	s := request[*kmsg.JoinGroupResponse](t, cl, joinReq("sg", "", &inst, "t"))
	if s.ErrorCode != 0 {
		t.Fatalf("static join: %v", kerr.ErrorForCode(s.ErrorCode))
	}
	codes = txnCodes(t, n, cl, txnOffsetReq("tx", "sg", 2, 0, s.Generation, "impostor", &inst, txnOffset{"t", 0, 3, ""}))
	wantCode(t, "fenced instance", codes["t-0"], kerr.FencedInstanceID)
	codes = txnCodes(t, n, cl, txnOffsetReq("tx", "sg", 2, 0, s.Generation, s.MemberID, &inst, txnOffset{"t", 0, 3, ""}))
	wantCode(t, "static member", codes["t-0"], nil)
	// v0 carries no member fields: accepted whatever the group.
	codes = txnCodes(t, n, pinned(n, 28, 0), txnOffsetReq("tx", "kg", 2, 0, -1, "", nil, txnOffset{"t", 1, 4, ""}))
	wantCode(t, "v0 commit to a group with members", codes["t-1"], nil)
}
