package groups

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestDeleteGroupRollsBackWhenNotCommitted deletes a group whose
// tombstones cannot be committed: both followers of its
// __consumer_offsets partition are paused (SIGSTOP), so the append is
// accepted (the ISR still lists them and, without a controller quorum,
// cannot shrink) but the high watermark never passes it and the commit
// times out. DeleteGroups then answers an error and the coordinator's
// in-memory group is as before (the runtime's undo): its committed offset
// is still served. Once the followers are back the deletion goes through.
func TestDeleteGroupRollsBackWhenNotCommitted(t *testing.T) {
	c := startClusterWith(t, map[string]string{"min.insync.replicas": "2"})
	const topic, group = "rollback", "rollback-group"
	c.CreateTopic(topic, 1, 3, nil, nil)
	cl := c.Client(kgo.RequestTimeoutOverhead(2 * time.Minute))
	adm := kadm.NewClient(cl)
	offs := kadm.Offsets{}
	offs.AddOffset(topic, 0, 42, -1)
	if err := adm.CommitAllOffsets(tctx(t, 30*time.Second), group, offs); err != nil {
		t.Fatal(err)
	}
	coord, err := c.coordinator(cl, group)
	if err != nil {
		t.Fatal(err)
	}
	// OffsetFetch v7 (topics by name, one group) straight to the
	// coordinator: the paused nodes answer nothing.
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(9, 7)
	fcl := c.Client(kgo.MaxVersions(vs))
	fetch := func() (int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 7
		req.Group = group
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		r, err := fcl.Broker(int(coord)).Request(tctx(t, 10*time.Second), req)
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.OffsetFetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return 0, err
		}
		return resp.Topics[0].Partitions[0].Offset, nil
	}
	if o, err := fetch(); err != nil || o != 42 {
		t.Fatalf("committed offset %d, %v", o, err)
	}
	deleteGroup := func(timeout time.Duration) int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{group}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		resp, err := cl.Broker(int(coord)).Request(ctx, req)
		if err != nil {
			t.Fatalf("DeleteGroups: %v", err)
		}
		return resp.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}

	var paused []int32
	for id := int32(1); id <= 3; id++ {
		if id != coord {
			c.Pause(id)
			paused = append(paused, id)
		}
	}
	start := time.Now()
	code := deleteGroup(100 * time.Second)
	t.Logf("DeleteGroups with the followers paused: %v after %v", kerr.ErrorForCode(code), time.Since(start).Round(time.Millisecond))
	if code == 0 {
		t.Fatal("DeleteGroups succeeded although its tombstones could not be committed")
	}
	if o, err := fetch(); err != nil || o != 42 {
		t.Fatalf("after the failed deletion the coordinator serves offset %d (%v), want the group back with 42", o, err)
	}
	for _, id := range paused {
		c.Resume(id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code = deleteGroup(30 * time.Second)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DeleteGroups after the followers resumed: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if o, err := fetch(); err != nil || o != -1 {
		t.Fatalf("after the deletion: offset %d, %v; want -1", o, err)
	}
}
