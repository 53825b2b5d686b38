package cluster

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testcluster"
)

// TestLeaderKillUnderAcksAll SIGKILLs the leader of partition 0 while an
// idempotent acks=all producer runs against an RF 3, min.insync.replicas=2
// topic; a new leader with a higher epoch takes over, acknowledgements keep
// coming, the killed broker restarts on its data, catches up and rejoins
// the ISR, and every acknowledged record is at its acknowledged offset,
// once, on every replica.
func TestLeaderKillUnderAcksAll(t *testing.T) {
	c := startCluster(t, 3, nil)
	const topic, parts = "failover", int32(3)
	c.CreateTopic(topic, parts, 3, map[string]string{"min.insync.replicas": "2"}, nil)

	lg := c.startLoad(topic, parts, 1500)
	defer lg.Abort()
	testcluster.WaitFor(t, 30*time.Second, "1000 acks before the kill", func() (bool, string) {
		n, _ := lg.AcksSince(time.Time{}, -1)
		return n >= 1000, lg.Summary()
	})
	checkHTTPAPI(t, c, topic)

	md, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	before := md[0]
	victim := c.Node(before.Leader)
	t.Logf("partition 0 before the kill: %v; SIGKILL node %d", before, before.Leader)
	victim.Kill()
	killedAt := time.Now()

	var after testcluster.PartitionMeta
	elect := testcluster.WaitFor(t, 30*time.Second, "a new leader for partition 0", func() (bool, string) {
		m, err := c.Meta(topic)
		if err != nil {
			return false, err.Error()
		}
		after = m[0]
		return after.Leader >= 0 && after.Leader != before.Leader && after.LeaderEpoch > before.LeaderEpoch, after.String()
	})
	var firstAck time.Time
	testcluster.WaitFor(t, 30*time.Second, "an acknowledgement on partition 0 from the new leader", func() (bool, string) {
		n, first := lg.AcksSince(killedAt, 0)
		firstAck = first
		return n > 0, lg.Summary()
	})
	failover := firstAck.Sub(killedAt)
	t.Logf("new leader of partition 0: %v (visible in Metadata %v after the kill)", after, elect.Round(time.Millisecond))
	t.Logf("FAILOVER TIME (SIGKILL -> first ack on partition 0 from the new leader): %v", failover.Round(time.Millisecond))
	if slices.Contains(after.ISR, before.Leader) {
		// Fine for a moment, but the fenced broker must leave the ISR.
		t.Logf("killed node %d still in the ISR right after the election: %v", before.Leader, after.ISR)
	}
	testcluster.WaitFor(t, 30*time.Second, "acks keep coming on every partition after the failover", func() (bool, string) {
		for p := int32(0); p < parts; p++ {
			if n, _ := lg.AcksSince(firstAck, p); n < 200 {
				return false, fmt.Sprintf("partition %d: %d acks since the failover; %s", p, n, lg.Summary())
			}
		}
		return true, ""
	})

	victim.Restart()
	restartedAt := time.Now()
	rejoin := testcluster.WaitFor(t, 60*time.Second, fmt.Sprintf("node %d back in every ISR", before.Leader), func() (bool, string) {
		all, err := c.MetaAll(topic)
		if err != nil {
			return false, err.Error()
		}
		for id, m := range all {
			for p, pm := range m {
				if !slices.Contains(pm.ISR, before.Leader) {
					return false, fmt.Sprintf("node %d sees partition %d: %v", id, p, pm)
				}
			}
		}
		return true, ""
	})
	t.Logf("node %d rejoined every ISR %v after its restart", before.Leader, rejoin.Round(time.Millisecond))
	// Keep producing a little with the returned replica in the ISR.
	testcluster.WaitFor(t, 30*time.Second, "acks after the rejoin", func() (bool, string) {
		n, _ := lg.AcksSince(restartedAt.Add(rejoin), -1)
		return n >= 500, lg.Summary()
	})

	lg.Stop(30 * time.Second)
	gap, gapAt := lg.MaxGap(-1, time.Time{}, time.Time{})
	nfailed, fv, ferr := lg.Failures()
	gap0, gap0At := lg.MaxGap(0, time.Time{}, time.Time{})
	t.Logf("producer: %s", lg.Summary())
	t.Logf("LONGEST GAP between consecutive acks (any partition): %v, ending %v after the kill", gap.Round(time.Millisecond), gapAt.Sub(killedAt).Round(time.Millisecond))
	t.Logf("longest gap between acks on partition 0: %v, ending %v after the kill", gap0.Round(time.Millisecond), gap0At.Sub(killedAt).Round(time.Millisecond))
	t.Logf("producer-side partition errors (retried by franz-go): %v", lg.log.snapshot())
	if nfailed > 0 {
		t.Errorf("record %s failed: %v", fv, ferr)
		t.Fatalf("%d records failed with an idempotent, infinitely retrying acks=all producer", nfailed)
	}

	acked := lg.Acked()
	leos := c.waitReplicasConverged(topic, parts, 60*time.Second)
	read := c.ConsumeAll(topic, parts, 60*time.Second)
	testcluster.CheckAcked(t, "consumed from the leaders", acked, read)
	var total int64
	for _, l := range leos {
		total += l
	}
	if int64(len(read)) != total {
		t.Errorf("read %d distinct values, but the partitions hold %d records (LEOs %v)", len(read), total, leos)
	}
	for v := range read {
		if _, ok := acked[v]; !ok {
			t.Errorf("value %s in the log was never acknowledged", v)
		}
	}

	// Every replica holds the same records: with all three in the ISR at
	// LEO == HW, stop them (SIGKILL: what is acknowledged is on disk) and
	// read each one's segment files.
	for _, p := range c.Nodes() {
		p.Kill()
	}
	byOffset := map[testcluster.Ack]string{}
	for v, a := range read {
		byOffset[a] = v
	}
	for _, p := range c.Nodes() {
		for part := int32(0); part < parts; part++ {
			recs, end := diskRecords(t, p.DataDir(), topic, part)
			if end < leos[part] {
				t.Errorf("node %d: %s/%d on disk ends at %d, below the converged LEO %d", p.NodeID(), topic, part, end, leos[part])
			}
			bad := 0
			for off := int64(0); off < leos[part]; off++ {
				if want := byOffset[testcluster.Ack{Partition: part, Offset: off}]; recs[off] != want {
					if bad < 5 {
						t.Errorf("node %d: %s/%d offset %d holds %q, leader served %q", p.NodeID(), topic, part, off, recs[off], want)
					}
					bad++
				}
			}
		}
	}
	t.Logf("verified %d acknowledged records (%d in the log) on all 3 replicas", len(acked), total)
}

// checkHTTPAPI checks a partition leader's /api/v1/partitions (three
// replica states, followers with a log end offset and a last-caught-up
// time) and that /metrics answers with Prometheus text.
func checkHTTPAPI(t *testing.T, c *cluster, topic string) {
	t.Helper()
	md, err := c.Meta(topic)
	if err != nil {
		t.Fatal(err)
	}
	leader := c.Node(md[0].Leader)
	testcluster.WaitFor(t, 10*time.Second, "leader's /api/v1/partitions shows 3 caught-up replica states", func() (bool, string) {
		hp, err := httpPartitionOf(leader, topic, 0)
		if err != nil {
			return false, err.Error()
		}
		if hp.Role != "leader" || hp.Leader != md[0].Leader || len(hp.ReplicaStates) != 3 || len(hp.ISR) != 3 {
			return false, fmt.Sprintf("%+v", hp)
		}
		for _, rs := range hp.ReplicaStates {
			if rs.LogEndOffset <= 0 || !rs.InSync {
				return false, fmt.Sprintf("%+v", hp)
			}
			if rs.ID != hp.Leader && rs.LastCaughtUpMs <= 0 {
				return false, fmt.Sprintf("follower %d lastCaughtUpMs=%d: %+v", rs.ID, rs.LastCaughtUpMs, hp)
			}
		}
		return true, ""
	})
	resp, err := httpClient.Get("http://" + leader.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("/metrics content type %q", ct)
	}
	if !strings.Contains(string(body), "# TYPE ") || !strings.Contains(string(body), "# HELP ") {
		t.Errorf("/metrics does not look like Prometheus text:\n%.500s", body)
	}
	t.Logf("HTTP API: /api/v1/partitions on leader %d shows 3 replica states; /metrics 200 (%d bytes)", leader.NodeID(), len(body))
}
