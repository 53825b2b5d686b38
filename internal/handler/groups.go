package handler

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/protocol"
)

// groupAPI serves the group APIs against one group coordinator. The
// handler files 08..16, 28, 42, 47, 68, 69, 76 and 77 are its methods;
// the protocol logic itself lives in internal/group, these only adapt
// kmsg requests and Reply.Await.
type groupAPI struct {
	h *Handlers
	c *group.Coordinator
}

// registerGroupAPIs installs the consumer-group APIs (FindCoordinator,
// JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
// DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, TxnOffsetCommit),
// served by c, or if nil a group coordinator configured from the broker
// properties.
func (h *Handlers) registerGroupAPIs(reg *protocol.Registry, c *group.Coordinator) {
	if c == nil {
		c = group.New(h.b, group.Options{Config: group.ConfigFrom(h.b.Config())})
	}
	h.groups = c
	// Coordinate the groups of the offsets partitions this node leads.
	// The leader epoch orders the changes: a stale one is ignored.
	h.b.OnLeadershipChange(func(tp broker.TP, isLeader bool, epoch int32) {
		if tp.Topic != group.OffsetsTopic {
			return
		}
		if isLeader {
			c.ElectAt(tp.Partition, epoch)
		} else {
			c.ResignAt(tp.Partition, epoch)
		}
	})
	// A transaction marker replicated on an offsets partition ends the
	// producer's pending transactional offsets there (WriteTxnMarkers).
	h.onMarker = append(h.onMarker, func(topic string, partition int32, producerID int64, commit bool) {
		if topic == group.OffsetsTopic {
			c.CompleteTxn(partition, producerID, commit)
		}
	})
	g := &groupAPI{h: h, c: c}
	for _, api := range []protocol.Handler{
		{Key: 8, MinVersion: 0, MaxVersion: 10, Serve: g.offsetCommitIDs},
		{Key: 9, MinVersion: 0, MaxVersion: 10, Serve: g.offsetFetchIDs},
		{Key: 10, MinVersion: 0, MaxVersion: 6, Serve: g.findCoordinator},
		{Key: 11, MinVersion: 0, MaxVersion: 7, Serve: g.joinGroupAuthz},
		{Key: 12, MinVersion: 0, MaxVersion: 4, Serve: g.heartbeatAuthz},
		{Key: 13, MinVersion: 0, MaxVersion: 4, Serve: g.leaveGroupAuthz},
		{Key: 14, MinVersion: 0, MaxVersion: 5, Serve: g.syncGroupAuthz},
		{Key: 15, MinVersion: 0, MaxVersion: 5, Serve: g.describeGroupsAuthz},
		{Key: 16, MinVersion: 0, MaxVersion: 5, Serve: g.listGroupsAuthz},
		{Key: 28, MinVersion: 0, MaxVersion: 5, Serve: g.txnOffsetCommit},
		{Key: 42, MinVersion: 0, MaxVersion: 2, Serve: g.deleteGroupsAuthz},
		{Key: 47, MinVersion: 0, MaxVersion: 0, Serve: g.offsetDeleteAuthz},
		{Key: 68, MinVersion: 0, MaxVersion: 1, Serve: g.consumerGroupHeartbeat, Hidden: g.consumerProtocolOff},
		{Key: 69, MinVersion: 0, MaxVersion: 1, Serve: g.consumerGroupDescribe, Hidden: g.consumerProtocolOff},
		{Key: 76, MinVersion: 1, MaxVersion: 1, Serve: g.shareGroupHeartbeat},
		{Key: 77, MinVersion: 1, MaxVersion: 1, Serve: g.shareGroupDescribe},
	} {
		reg.Register(api)
	}
}

// reply turns a coordinator result into a protocol reply: ready responses
// go out at once, waiting ones through Reply.Await so the connection keeps
// reading requests meanwhile.
func reply[T kmsg.Response](r group.Result[T]) protocol.Reply {
	if r.Wait == nil {
		return protocol.Reply{Resp: r.Resp}
	}
	return protocol.Reply{Await: func() kmsg.Response { return r.Wait() }}
}

// clientHost is the member's host as Kafka reports it ("/1.2.3.4").
func clientHost(r *protocol.Request) string {
	if r.Conn == nil {
		return ""
	}
	addr := r.Conn.RemoteAddr()
	if addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "/" + addr.String()
	}
	return "/" + host
}
