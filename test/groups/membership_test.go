package groups

import (
	"fmt"
	"testing"
	"time"
)

// member is one running group member of some client; stop makes it leave
// the group cleanly (committing what it consumed, as the client does on
// close) and returns once it has.
type member interface {
	stop(t *testing.T)
}

// starter starts a member called name of group on topic, recording every
// value it consumes in rec.
type starter func(t *testing.T, c *cluster, name, group, topic string, rec *recorder) member

const (
	membershipPartitions = 12
	membershipRecords    = 6000
)

// runMembership is the scenario every client goes through on a fresh
// three-broker cluster: a 12-partition topic (replication factor 3),
// three members consuming from the start while a third of the records is
// produced; a fourth member joins while the second third is being
// produced, and member 2 leaves while the last third is. Every record
// must be consumed (at least once), and once all are, the committed
// offsets must reach the log end of every partition.
func runMembership(t *testing.T, start starter) {
	c := startCluster(t)
	topic, group := "membership", "membership-group"
	prefix := "v"
	c.CreateTopic(topic, membershipPartitions, 3, nil, nil)
	rec := newRecorder()
	t0 := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }

	var ms []member
	for i := 1; i <= 3; i++ {
		ms = append(ms, start(t, c, fmt.Sprintf("m%d", i), group, topic, rec))
	}
	c.waitStable(group, 3, 60*time.Second)
	step("3 members stable")

	third := membershipRecords / 3
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		c.produce(topic, prefix, 0, third)
	}()
	<-produced
	rec.waitDistinct(t, third/2, 60*time.Second) // consuming
	step("first third produced")

	// A member joins while records are being produced.
	produced = make(chan struct{})
	go func() {
		defer close(produced)
		c.produce(topic, prefix, third, third)
	}()
	ms = append(ms, start(t, c, "m4", group, topic, rec))
	c.waitStable(group, 4, 60*time.Second)
	<-produced
	step("m4 joined, second third produced")

	// A member leaves while records are being produced.
	produced = make(chan struct{})
	go func() {
		defer close(produced)
		c.produce(topic, prefix, 2*third, membershipRecords-2*third)
	}()
	ms[1].stop(t)
	c.waitStable(group, 3, 60*time.Second)
	<-produced
	step("m2 left, last third produced")

	if !rec.waitDistinctOK(membershipRecords, 90*time.Second) {
		c.diagnoseMissing(t, rec, topic, group, prefix, membershipRecords)
		t.Fatalf("consumed %d distinct records, want %d", rec.distinct(), membershipRecords)
	}
	step("every record consumed")
	c.waitCommittedAtEnd(group, topic, 60*time.Second)
	step("committed offsets at the log end")
	for i, m := range ms {
		if i != 1 {
			m.stop(t)
		}
	}
	c.waitCommittedAtEnd(group, topic, 10*time.Second)
	dups := rec.check(t, prefix, membershipRecords)
	rec.mu.Lock()
	t.Logf("records per member %v; %d redelivered (at-least-once)", rec.byMember, dups)
	if rec.byMember["m4"] == 0 {
		t.Errorf("m4, which joined mid-stream, consumed nothing")
	}
	rec.mu.Unlock()
	step("done")
}
