package status

import "github.com/sluice-io/sluice/internal/metadata"

// Replica states in Replica.Status (cluster view).
const (
	ReplicaLeader       = "leader"
	ReplicaInSync       = "in-sync"
	ReplicaOutOfSync    = "out-of-sync"
	ReplicaFenced       = "fenced"
	ReplicaShuttingDown = "shutting-down"
	ReplicaUnreachable  = "unreachable"
)

// mergePartition builds one partition of the cluster view from the image
// (leader, ISR, replicas), the leader's own report (its LEO and HW, and
// each follower's LEO from the follower's fetches) and each replica's own
// report. A replica whose broker was not reached gets no offsets: the
// leader's record of its last fetch would be stale.
func mergePartition(topic string, mp *metadata.Partition, self int32, local map[int32]map[string]*Partition, status map[int32]string, minISR int) Partition {
	key := tpKey(topic, mp.Index)
	p := Partition{Topic: topic, Partition: mp.Index, Leader: mp.Leader, LeaderEpoch: mp.LeaderEpoch,
		Replicas: nonNil(mp.Replicas), ISR: nonNil(mp.ISR), ELR: mp.ELR, LastKnownELR: mp.LastKnownELR, Role: "none", LogStartOffset: -1, LogEndOffset: -1, HighWatermark: -1,
		LeaderLogEndOffset: -1, LeaderHighWatermark: -1, MinISR: minISR, ReplicaStates: []Replica{}}
	lv := local[mp.Leader][key]
	if lv != nil && (lv.Role != "leader" || lv.LeaderEpoch != mp.LeaderEpoch) {
		lv = nil // the leader has not applied this epoch yet
	}
	if lv != nil {
		p.LeaderLogEndOffset, p.LeaderHighWatermark = lv.LogEndOffset, lv.HighWatermark
	}
	if own := local[self][key]; own != nil {
		p.Role, p.LogStartOffset, p.LogEndOffset, p.HighWatermark = own.Role, own.LogStartOffset, own.LogEndOffset, own.HighWatermark
		p.DirtyRatio = own.DirtyRatio
	} else if lv != nil {
		p.LogStartOffset, p.LogEndOffset, p.HighWatermark = lv.LogStartOffset, lv.LogEndOffset, lv.HighWatermark
		p.DirtyRatio = lv.DirtyRatio
	}
	// The LSO that matters to consumers is the leader's.
	if lv != nil {
		p.LastStableOffset, p.OpenTransactions = lv.LastStableOffset, lv.OpenTransactions
	} else if own := local[self][key]; own != nil {
		p.LastStableOffset, p.OpenTransactions = own.LastStableOffset, own.OpenTransactions
	}
	isr := map[int32]bool{}
	for _, id := range mp.ISR {
		isr[id] = true
	}
	for _, id := range mp.Replicas {
		rs := Replica{ID: id, LogEndOffset: -1, HighWatermark: -1, InSync: isr[id], LastCaughtUpMs: -1, Lag: -1}
		own, reached := local[id][key], local[id] != nil
		if reached {
			if lv != nil {
				for _, lr := range lv.ReplicaStates {
					if lr.ID == id && lr.LogEndOffset >= 0 {
						rs.LogEndOffset, rs.HighWatermark, rs.LastCaughtUpMs, rs.Source = lr.LogEndOffset, lr.HighWatermark, lr.LastCaughtUpMs, "leader"
					}
				}
			}
			if own != nil {
				if rs.Source == "" {
					rs.LogEndOffset, rs.Source = own.LogEndOffset, "self"
				}
				rs.HighWatermark = own.HighWatermark
			}
		}
		switch st := status[id]; {
		case st == BrokerFenced:
			rs.Status = ReplicaFenced
		case st == BrokerShuttingDown:
			rs.Status = ReplicaShuttingDown
		case !reached:
			rs.Status = ReplicaUnreachable
		case id == mp.Leader:
			rs.Status = ReplicaLeader
		case rs.InSync:
			rs.Status = ReplicaInSync
		default:
			rs.Status = ReplicaOutOfSync
		}
		if rs.LogEndOffset >= 0 && p.LeaderLogEndOffset >= 0 {
			rs.Lag = max(p.LeaderLogEndOffset-rs.LogEndOffset, 0)
		}
		p.ReplicaStates = append(p.ReplicaStates, rs)
	}
	p.UnderReplicated = len(mp.ISR) < len(mp.Replicas)
	p.UnderMinISR = len(mp.ISR) < minISR
	ls := status[mp.Leader]
	p.Offline = mp.Leader < 0 || ls == "" || ls == BrokerFenced || ls == BrokerUnreachable
	return p
}

// nonNil returns s, or an empty slice for nil (JSON [] rather than null).
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
