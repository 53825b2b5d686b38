package broker_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/vfs"
)

// idleFollowerCluster starts two in-memory brokers (vfs.NewMem: a real
// disk cannot hold this many partitions on one node yet) and a topic of n
// partitions all led by broker 1 and followed by broker 2, and waits until
// broker 2's fetcher follows them all and has caught up. leaderProps go to
// broker 1.
func idleFollowerCluster(t *testing.T, n int, leaderProps map[string]string) (*fakeQuorum, []*member, []*vfs.Mem) {
	t.Helper()
	q := newFakeQuorum()
	fast := map[string]string{"replica.fetch.wait.max.ms": "100"}
	for k, v := range leaderProps {
		fast[k] = v
	}
	fss := []*vfs.Mem{vfs.NewMem(), vfs.NewMem()}
	ms := []*member{
		startMemberWith(t, q, 1, "/data1", "", fss[0], fast),
		startMemberWith(t, q, 2, "/data2", "", fss[1], map[string]string{"replica.fetch.wait.max.ms": "100"}),
	}
	q.update(func(im *metadata.Image) error {
		tp := &metadata.Topic{Name: "idle", ID: metadata.NewUUID(), Configs: map[string]string{}}
		for i := 0; i < n; i++ {
			tp.Partitions = append(tp.Partitions, metadata.Partition{Index: int32(i), Leader: 1, LeaderEpoch: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
		}
		im.Topics[tp.Name] = tp
		return nil
	})
	waitFor(t, "broker 2 to follow every partition", 120*time.Second, func() bool {
		st := ms[1].b.FetcherStats()
		return len(st) == 1 && st[0].Partitions == n && st[0].Rounds > 3
	})
	return q, ms, fss
}

// measureFollower returns broker 2's fetch bytes per round (request and
// response frames) over the next n fetch rounds (at least).
func measureFollower(t *testing.T, m *member, n int64) (sent, recv float64, rounds int64) {
	t.Helper()
	a := m.b.FetcherStats()[0]
	b := a
	waitFor(t, fmt.Sprintf("%d fetch rounds", n), 60*time.Second, func() bool {
		b = m.b.FetcherStats()[0]
		return b.Rounds-a.Rounds >= n
	})
	rounds = b.Rounds - a.Rounds
	return float64(b.BytesSent-a.BytesSent) / float64(rounds), float64(b.BytesReceived-a.BytesReceived) / float64(rounds), rounds
}

// TestFollowerFetchBytesIdlePartitions measures what a follower of many
// idle partitions sends and receives per fetch round with fetch sessions
// (KIP-227) and without (the leader's
// max.incremental.fetch.session.cache.slots=0), in the same run, and
// checks that sessions cut it by far. SLUICE_IDLE_PARTITIONS sets the
// partition count: 1,000 by default to keep the suite quick; the figures
// in docs/fetch-sessions.md are for 10,000 (about three minutes, mostly
// opening the partitions).
func TestFollowerFetchBytesIdlePartitions(t *testing.T) {
	n := 1000
	if v := os.Getenv("SLUICE_IDLE_PARTITIONS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	modes := []struct {
		name  string
		props map[string]string
	}{
		{"sessions", nil},
		{"no sessions", map[string]string{"max.incremental.fetch.session.cache.slots": "0"}},
	}
	var per [2]float64
	for i, mode := range modes {
		_, ms, _ := idleFollowerCluster(t, n, mode.props)
		sent, recv, rounds := measureFollower(t, ms[1], 10)
		per[i] = sent + recv
		t.Logf("%d idle partitions, %s: %.0f bytes sent + %.0f received per follower fetch round (%d rounds)", n, mode.name, sent, recv, rounds)
		fmt.Printf("idle-follower partitions=%d mode=%q sent_per_round=%.0f recv_per_round=%.0f rounds=%d\n", n, mode.name, sent, recv, rounds)
		for _, m := range ms {
			m.stop()
		}
	}
	t.Logf("ratio without/with sessions: %.0fx", per[1]/per[0])
	fmt.Printf("idle-follower ratio_no_sessions_over_sessions=%.1f\n", per[1]/per[0])
	// An idle incremental round is a few dozen bytes each way; a full one
	// names every partition (over 20 bytes each way per partition).
	if per[0] > 200 || per[1] < float64(n)*40 {
		t.Fatalf("bytes per round: %.0f with sessions, %.0f without", per[0], per[1])
	}
}

// A follower keeps replicating through session errors: the leader
// restarts (its sessions are gone: FETCH_SESSION_ID_NOT_FOUND), the
// follower falls back to a full fetch, opens a new session and catches up.
func TestFollowerSessionSurvivesLeaderRestart(t *testing.T) {
	q, ms, fss := idleFollowerCluster(t, 50, nil)
	leader := ms[0]
	for i := 0; i < 3; i++ {
		if r := produceOne(t, leader.addr, "idle", -1, fmt.Sprint("before-", i)); r.ErrorCode != 0 {
			t.Fatalf("produce: error %d", r.ErrorCode)
		}
	}
	caughtUp := func(want int64) func() bool {
		return func() bool {
			p, err := ms[1].b.Partition("idle", 0)
			return err == nil && p.LogEndOffset() == want && p.HighWatermark() == want
		}
	}
	waitFor(t, "follower to catch up", 10*time.Second, caughtUp(3))
	roundsBefore := ms[1].b.FetcherStats()[0].Rounds
	leader.stop()
	ms[0] = startMemberWith(t, q, 1, "/data1", leader.addr, fss[0], map[string]string{"replica.fetch.wait.max.ms": "100"})
	q.unfence(1)
	waitFor(t, "leader to serve again", 10*time.Second, func() bool {
		p, err := ms[0].b.Partition("idle", 0)
		return err == nil && p.IsLeader()
	})
	for i := 0; i < 2; i++ {
		if r := produceOne(t, ms[0].addr, "idle", -1, fmt.Sprint("after-", i)); r.ErrorCode != 0 {
			t.Fatalf("produce after restart: error %d", r.ErrorCode)
		}
	}
	waitFor(t, "follower to catch up after the restart", 15*time.Second, caughtUp(5))
	if ms[1].b.FetcherStats()[0].Rounds <= roundsBefore {
		t.Fatal("no fetch rounds after the restart")
	}
	if st := ms[0].h.FetchSessions(); st.Sessions != 1 || st.Partitions != 50 {
		t.Fatalf("restarted leader's session cache %+v, want the follower's session of 50 partitions", st)
	}
}
