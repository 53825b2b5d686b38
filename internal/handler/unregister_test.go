package handler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UnregisterBroker on a single node (metadata.Local): an unknown id is
// BROKER_ID_NOT_REGISTERED, the node itself INVALID_REQUEST (it is
// active), and it stays listed.
func TestUnregisterBrokerSingleNode(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	self := n.b.Config().NodeID
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = self + 41
	resp := request[*kmsg.UnregisterBrokerResponse](t, cl, req)
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unknown broker: %v", err)
	}
	req.BrokerID = self
	resp = request[*kmsg.UnregisterBrokerResponse](t, cl, req)
	if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.InvalidRequest) || resp.ErrorMessage == nil ||
		!strings.Contains(*resp.ErrorMessage, "active") {
		t.Fatalf("the node itself: %v %v", err, resp.ErrorMessage)
	}
	dc := request[*kmsg.DescribeClusterResponse](t, cl, kmsg.NewPtrDescribeClusterRequest())
	if len(dc.Brokers) != 1 || dc.Brokers[0].NodeID != self {
		t.Fatalf("DescribeCluster: %+v", dc.Brokers)
	}
}
