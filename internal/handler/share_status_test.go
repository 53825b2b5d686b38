package handler_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/sluice-io/sluice/internal/share"
	"github.com/sluice-io/sluice/internal/status"
)

// TestShareGroupStatusView: the status pages' /api/v1/groups shows a
// share group with, per share partition, its start offset, the records
// in flight and the lag (records from the start offset to the high
// watermark not yet acknowledged or archived).
func TestShareGroupStatusView(t *testing.T) {
	n := startNode(t, "", sharePartProps)
	sharePartTopic(t, n, "qs", 10)
	setGroupConfig(t, n, "sgs", "share.auto.offset.reset", "earliest")
	m := newShareMember(t, n, "sgs", "qs")
	cl := n.client()
	if hb := shareHeartbeat(t, cl, "sgs", m.id, 0, []string{"qs"}); hb.ErrorCode != 0 {
		t.Fatalf("join: %d", hb.ErrorCode)
	}
	if got := acquiredOf(t, m.fetch(4)); len(got) != 4 {
		t.Fatalf("acquired %v, want offsets 0-3", got)
	}
	if resp := m.ack(m.epoch, acked{0, 1, []int8{share.AckAccept}}); resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("acknowledge: %+v", resp)
	}
	s := status.New(status.Options{Broker: n.b, Groups: n.h.Groups().Summaries, SharePartitions: n.h.SharePartitions().Statuses})
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/v1/groups")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var groups []status.GroupView
	if err := json.NewDecoder(resp.Body).Decode(&groups); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.ID != "sgs" {
			continue
		}
		if g.Type != "share" || len(g.Members) != 1 || len(g.Lag) != 1 || g.TotalLag != 8 {
			t.Fatalf("share group view %+v", g)
		}
		l := g.Lag[0]
		if l.Topic != "qs" || l.Partition != 0 || l.Committed != 2 || l.InFlight != 2 || l.HighWatermark != 10 || l.Lag != 8 {
			t.Fatalf("share partition view %+v: want start offset 2, 2 in flight, high watermark 10, lag 8", l)
		}
		return
	}
	t.Fatalf("no share group in %+v", groups)
}
