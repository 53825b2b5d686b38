package metadata

import (
	"context"
	"time"
)

// QuorumController is a Controller whose metadata quorum can change and be
// described (KIP-853: AddRaftVoter, RemoveRaftVoter; KIP-595:
// DescribeQuorum). The Raft controller is one; the single-node Local
// store is not.
type QuorumController interface {
	// AddVoter adds node id, whose controller listener is addr, once it
	// has caught up, waiting at most timeout.
	AddVoter(ctx context.Context, id int32, addr string, timeout time.Duration) error
	// RemoveVoter removes node id from the voters.
	RemoveVoter(ctx context.Context, id int32) error
	// DescribeQuorum reports the quorum as the active controller sees it.
	DescribeQuorum(ctx context.Context) (QuorumInfo, error)
}

// QuorumMember is one voter or observer in DescribeQuorum.
type QuorumMember struct {
	ID   int32  `json:"id"`
	Addr string `json:"addr,omitempty"`
	// LogEndOffset is its metadata log's last index, -1 if unknown.
	LogEndOffset int64 `json:"logEndOffset"`
}

// QuorumInfo is DescribeQuorum's answer: the leader, its term (Kafka's
// leader epoch), its commit index (the high watermark), the voters and the
// members that are not voters (observers: non-voting raft members and
// registered brokers).
type QuorumInfo struct {
	LeaderID      int32          `json:"leaderId"`
	LeaderEpoch   int32          `json:"leaderEpoch"`
	HighWatermark int64          `json:"highWatermark"`
	Voters        []QuorumMember `json:"voters"`
	Observers     []QuorumMember `json:"observers"`
}
