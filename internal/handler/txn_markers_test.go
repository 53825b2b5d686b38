package handler_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnOffsetCommitPreviousTxnCompleting: under transaction version 2 a
// producer's TxnOffsetCommit v5 (which adds the group's offsets partition
// to the transaction itself) and EndTxn arrive while the markers of its
// previous transaction are still being written. The markers are held here
// by denying CLUSTER_ACTION to the inter-broker principal (WriteTxnMarkers
// needs it). Both answer CONCURRENT_TRANSACTIONS, which clients retry or
// abort on, not NOT_ENOUGH_REPLICAS or INVALID_TXN_STATE, which they take
// as fatal; once the markers are in, both succeed.
func TestTxnOffsetCommitPreviousTxnCompleting(t *testing.T) {
	props := map[string]string{"authorizer.class.name": standardAuthorizer, "allow.everyone.if.no.acl.found": "true"}
	for k, v := range txnProps {
		props[k] = v
	}
	n := startNode(t, "", props)
	if err := n.b.CreateTopic("in", 1, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	cl := n.client()
	hold := creation(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", kmsg.ACLOperationClusterAction)
	hold.PermissionType = kmsg.ACLPermissionTypeDeny
	creq := kmsg.NewPtrCreateACLsRequest()
	// With an ACL on the cluster, ALTER (DeleteAcls) needs its own.
	alter := creation(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", kmsg.ACLOperationAlter)
	creq.Creations = append(creq.Creations, hold, alter)
	for _, r := range request[*kmsg.CreateACLsResponse](t, cl, creq).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create ACL: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}

	id := "tx-offsets-completing"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
	var pid int64
	var epoch int16
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := request[*kmsg.InitProducerIDResponse](t, cl, ip)
		if r.ErrorCode == 0 {
			pid, epoch = r.ProducerID, r.ProducerEpoch
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
		time.Sleep(50 * time.Millisecond)
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.Version = 3
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, pid, epoch
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "in", Partitions: []int32{0}}}
	if code := request[*kmsg.AddPartitionsToTxnResponse](t, cl, ap).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("add partition: %v", kerr.ErrorForCode(code))
	}
	end := func(e int16, commit bool) *kmsg.EndTxnResponse {
		req := kmsg.NewPtrEndTxnRequest()
		req.Version = 5
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, e, commit
		return request[*kmsg.EndTxnResponse](t, cl, req)
	}
	if r := end(epoch, true); r.ErrorCode != 0 || r.ProducerEpoch != epoch+1 {
		t.Fatalf("commit: %v, epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch)
	}
	next := epoch + 1

	commitOffsets := func() int16 {
		req := txnOffsetReq(id, "g-completing", pid, next, -1, "", nil, txnOffset{"in", 0, 5, ""})
		req.Version = 5
		r, err := cl.Broker(int(n.b.NodeID())).Request(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		return r.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := commitOffsets(); code != kerr.ConcurrentTransactions.Code {
		t.Errorf("TxnOffsetCommit while the markers are held: %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(code))
	}
	if r := end(next, false); r.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Errorf("EndTxn abort while the markers are held: %v, want CONCURRENT_TRANSACTIONS", kerr.ErrorForCode(r.ErrorCode))
	}

	dreq := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = hold.ResourceType, &hold.ResourceName, hold.ResourcePatternType
	f.Principal, f.Host, f.Operation, f.PermissionType = &hold.Principal, &hold.Host, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dreq.Filters = append(dreq.Filters, f)
	if r := request[*kmsg.DeleteACLsResponse](t, cl, dreq); r.Results[0].ErrorCode != 0 || len(r.Results[0].MatchingACLs) != 2 {
		t.Fatalf("delete ACL: %+v", r.Results)
	}
	deadline = time.Now().Add(20 * time.Second)
	code := commitOffsets()
	for ; code == kerr.ConcurrentTransactions.Code && time.Now().Before(deadline); code = commitOffsets() {
		time.Sleep(20 * time.Millisecond)
	}
	if code != 0 {
		t.Fatalf("TxnOffsetCommit once the markers are in: %v", kerr.ErrorForCode(code))
	}
	if r := end(next, true); r.ErrorCode != 0 || r.ProducerEpoch != next+1 {
		t.Fatalf("the second commit: %v, epoch %d", kerr.ErrorForCode(r.ErrorCode), r.ProducerEpoch)
	}
}
