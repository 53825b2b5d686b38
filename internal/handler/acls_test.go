package handler_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

const standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

func creation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
	return c
}

// CreateAcls, DescribeAcls and DeleteAcls at every version, with Kafka's
// per-binding and per-filter errors; the anonymous principal of this
// PLAINTEXT listener is the super user.
func TestAclAPIs(t *testing.T) {
	n := startNode(t, "", map[string]string{"authorizer.class.name": standardAuthorizer, "super.users": "User:ANONYMOUS"})
	cl := n.client()
	for v := int16(0); v <= 3; v++ {
		// kgo sends the highest version both sides have: cap it.
		vs := kversion.Stable()
		vs.SetMaxKeyVersion(30, v)
		vcl := n.client(kgo.MaxVersions(vs))
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = []kmsg.CreateACLsRequestCreation{
			creation(kmsg.ACLResourceTypeTopic, "orders-", kmsg.ACLResourcePatternTypePrefixed, "User:alice", kmsg.ACLOperationWrite),
			creation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeMatch, "User:alice", kmsg.ACLOperationWrite),
			creation(kmsg.ACLResourceTypeCluster, "other", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationAlter),
			creation(kmsg.ACLResourceTypeGroup, "g1", kmsg.ACLResourcePatternTypeLiteral, "alice", kmsg.ACLOperationRead),
			creation(kmsg.ACLResourceTypeGroup, "g1", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationAny),
			creation(kmsg.ACLResourceTypeGroup, "g1", kmsg.ACLResourcePatternTypeLiteral, "User:alice", kmsg.ACLOperationRead),
		}
		resp := request[*kmsg.CreateACLsResponse](t, vcl, req)
		want := []int16{0, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, 0}
		if v == 0 {
			want[0], want[1] = 0, 0 // v0 has no pattern type: both are LITERAL
		}
		if len(resp.Results) != len(want) {
			t.Fatalf("v%d: %d results", v, len(resp.Results))
		}
		for i, r := range resp.Results {
			if r.ErrorCode != want[i] {
				t.Errorf("v%d creation %d: error %d, want %d", v, i, r.ErrorCode, want[i])
			}
		}
	}
	describe := func(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType) *kmsg.DescribeACLsResponse {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = rt, name, pt
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return request[*kmsg.DescribeACLsResponse](t, cl, req)
	}
	all := describe(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny)
	// orders- PREFIXED, orders- LITERAL and x LITERAL (from v0), g1.
	if all.ErrorCode != 0 || len(all.Resources) != 4 {
		t.Fatalf("describe all: code %d, %+v", all.ErrorCode, all.Resources)
	}
	name := "orders-1"
	m := describe(kmsg.ACLResourceTypeTopic, &name, kmsg.ACLResourcePatternTypeMatch)
	if len(m.Resources) != 1 || m.Resources[0].ResourceName != "orders-" || m.Resources[0].ResourcePatternType != kmsg.ACLResourcePatternTypePrefixed {
		t.Fatalf("MATCH orders-1: %+v", m.Resources)
	}
	if bad := describe(kmsg.ACLResourceTypeUnknown, nil, kmsg.ACLResourcePatternTypeAny); bad.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("UNKNOWN resource type: code %d", bad.ErrorCode)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	bad := f
	bad.PermissionType = kmsg.ACLPermissionTypeUnknown
	del.Filters = []kmsg.DeleteACLsRequestFilter{f, bad}
	dr := request[*kmsg.DeleteACLsResponse](t, cl, del)
	if len(dr.Results) != 2 || dr.Results[0].ErrorCode != 0 || len(dr.Results[0].MatchingACLs) != 2 || dr.Results[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("delete: %+v", dr.Results)
	}
	if left := describe(kmsg.ACLResourceTypeAny, nil, kmsg.ACLResourcePatternTypeAny); len(left.Resources) != 2 {
		t.Fatalf("after delete: %+v", left.Resources)
	}
}

// Without authorizer.class.name the ACL APIs answer SECURITY_DISABLED;
// with one, a principal that is not a super user and has no ACL is
// refused (CLUSTER_AUTHORIZATION_FAILED).
func TestAclAPIsRefused(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		want  int16
	}{
		{nil, kerr.SecurityDisabled.Code},
		{map[string]string{"authorizer.class.name": standardAuthorizer}, kerr.ClusterAuthorizationFailed.Code},
	} {
		cl := startNode(t, "", tc.props).client()
		d := kmsg.NewPtrDescribeACLsRequest()
		d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		if r := request[*kmsg.DescribeACLsResponse](t, cl, d); r.ErrorCode != tc.want {
			t.Errorf("%v: DescribeAcls code %d, want %d", tc.props, r.ErrorCode, tc.want)
		}
		c := kmsg.NewPtrCreateACLsRequest()
		c.Creations = append(c.Creations, creation(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLResourcePatternTypeLiteral, "User:a", kmsg.ACLOperationRead))
		if r := request[*kmsg.CreateACLsResponse](t, cl, c); len(r.Results) != 1 || r.Results[0].ErrorCode != tc.want {
			t.Errorf("%v: CreateAcls %+v, want %d", tc.props, r.Results, tc.want)
		}
		del := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		del.Filters = append(del.Filters, f)
		if r := request[*kmsg.DeleteACLsResponse](t, cl, del); len(r.Results) != 1 || r.Results[0].ErrorCode != tc.want {
			t.Errorf("%v: DeleteAcls %+v, want %d", tc.props, r.Results, tc.want)
		}
	}
}

// DescribeLogDirs needs DESCRIBE on the cluster (as in Kafka's
// KafkaApis.handleDescribeLogDirsRequest): refused, the answer lists no
// directory and carries CLUSTER_AUTHORIZATION_FAILED; a super user gets
// the data directory.
func TestDescribeLogDirsAuthorization(t *testing.T) {
	for _, tc := range []struct {
		supers string
		want   int16
		dirs   int
	}{
		{"", kerr.ClusterAuthorizationFailed.Code, 0},
		{"User:ANONYMOUS", 0, 1},
	} {
		props := map[string]string{"authorizer.class.name": standardAuthorizer}
		if tc.supers != "" {
			props["super.users"] = tc.supers
		}
		cl := startNode(t, "", props).client()
		// Straight to the node: the client's sharded DescribeLogDirs
		// keeps no top-level error code.
		md := request[*kmsg.MetadataResponse](t, cl, kmsg.NewPtrMetadataRequest())
		resp, err := cl.Broker(int(md.Brokers[0].NodeID)).Request(ctx(t), kmsg.NewPtrDescribeLogDirsRequest())
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.DescribeLogDirsResponse)
		if r.ErrorCode != tc.want || len(r.Dirs) != tc.dirs {
			t.Errorf("super.users=%q: DescribeLogDirs code %d with %d dirs, want %d with %d", tc.supers, r.ErrorCode, len(r.Dirs), tc.want, tc.dirs)
		}
	}
}
