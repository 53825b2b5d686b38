package handler_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAuthorizedOperations: Metadata, DescribeCluster and DescribeGroups
// report the principal's authorized operations when asked (KIP-430): every
// supported one where no ACL restricts the resource, only READ and the
// DESCRIBE it implies on a topic with a single ALLOW READ, and the
// "not requested" value when not asked.
func TestAuthorizedOperations(t *testing.T) {
	n := startNode(t, "", map[string]string{"authorizer.class.name": standardAuthorizer, "allow.everyone.if.no.acl.found": "true",
		"offsets.topic.num.partitions": "1"})
	for _, topic := range []string{"open", "ro"} {
		if err := n.b.CreateTopic(topic, 1, 1, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	cl := n.client()
	creq := kmsg.NewPtrCreateACLsRequest()
	creq.Creations = append(creq.Creations, creation(kmsg.ACLResourceTypeTopic, "ro", kmsg.ACLResourcePatternTypeLiteral, "User:ANONYMOUS", kmsg.ACLOperationRead))
	for _, r := range request[*kmsg.CreateACLsResponse](t, cl, creq).Results {
		if r.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(r.ErrorCode))
		}
	}
	bits := func(ops ...int) int32 {
		var b int32
		for _, op := range ops {
			b |= 1 << op
		}
		return b
	}
	allTopic := bits(3, 4, 5, 6, 7, 8, 10, 11) // READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
	md := kmsg.NewPtrMetadataRequest()
	md.IncludeTopicAuthorizedOperations = true
	for _, name := range []string{"open", "ro"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		md.Topics = append(md.Topics, rt)
	}
	got := map[string]int32{}
	for _, tp := range request[*kmsg.MetadataResponse](t, cl, md).Topics {
		got[*tp.Topic] = tp.AuthorizedOperations
	}
	if got["open"] != allTopic || got["ro"] != bits(3, 8) {
		t.Fatalf("topic authorized operations %v: want open %b, ro %b", got, allTopic, bits(3, 8))
	}
	md.IncludeTopicAuthorizedOperations = false
	if tp := request[*kmsg.MetadataResponse](t, cl, md).Topics[0]; tp.AuthorizedOperations != -2147483648 {
		t.Fatalf("not asked: %d", tp.AuthorizedOperations)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if got, want := request[*kmsg.DescribeClusterResponse](t, cl, dc).ClusterAuthorizedOperations, bits(5, 7, 8, 9, 10, 11, 12); got != want {
		t.Fatalf("cluster authorized operations %b, want %b", got, want)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g"}, true
	if g := request[*kmsg.DescribeGroupsResponse](t, cl, dg).Groups[0]; g.ErrorCode != 0 || g.AuthorizedOperations != bits(3, 6, 8) {
		t.Fatalf("group authorized operations %b (%v), want %b", g.AuthorizedOperations, kerr.ErrorForCode(g.ErrorCode), bits(3, 6, 8))
	}
}
