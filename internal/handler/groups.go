package handler

import "github.com/sluice-io/sluice/internal/protocol"

// registerGroupAPIs installs the consumer-group APIs (FindCoordinator,
// JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
// DescribeGroups, ListGroups, DeleteGroups, OffsetDelete).
func (h *Handlers) registerGroupAPIs(reg *protocol.Registry) {}
