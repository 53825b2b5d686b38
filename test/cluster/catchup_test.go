package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRestartedBrokerServesOnlyCaughtUp: a broker restarted (SIGKILL) in
// a three-node cluster with many topics, some created while it was down,
// never answers a client with UNKNOWN_TOPIC_ID or
// UNKNOWN_TOPIC_OR_PARTITION for a topic that exists: it holds client
// requests until it has applied the metadata log up to its own
// registration (Kafka's BrokerServer waits for the
// BrokerLifecycleManager's initialCatchUpFuture before it enables request
// processing). A client hammers the restarted node alone, from the moment
// its process starts until it answers for every topic.
func TestRestartedBrokerServesOnlyCaughtUp(t *testing.T) {
	c := startCluster(t, 3, nil)
	const before, during = 60, 40
	for i := range before {
		c.CreateTopic(fmt.Sprintf("cu-%03d", i), 1, 3, nil, nil)
	}
	x := c.Node(3)
	x.Kill()
	adm := kadm.NewClient(c.Client())
	ctx := context.Background()
	// Created while the node is down: it learns of them only from the
	// controller after the restart.
	var names []string
	for i := range before + during {
		names = append(names, fmt.Sprintf("cu-%03d", i))
	}
	// (The killed node may have been the active controller: retry until
	// the quorum has a new one.)
	var ids map[string][16]byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		adm.CreateTopics(ctx, 1, 2, nil, names[before:]...) // two brokers are up
		td, err := adm.ListTopics(ctx, names...)
		if err == nil && len(td) == len(names) && td.Error() == nil {
			ids = map[string][16]byte{}
			for _, d := range td {
				ids[d.Topic] = d.ID
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics not all listed: %d of %d, %v %v", len(td), len(names), err, td.Error())
		}
		time.Sleep(200 * time.Millisecond)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(x.Addr()), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seed := cl.SeedBrokers()[0]

	var (
		mu          sync.Mutex
		bad         []string
		answered    int
		cleanStreak int
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		stop := time.Now().Add(90 * time.Second)
		for time.Now().Before(stop) {
			if probeCaughtUp(ctx, seed, names, ids, func(s string) {
				mu.Lock()
				bad = append(bad, s)
				mu.Unlock()
			}, func() { mu.Lock(); answered++; mu.Unlock() }) {
				mu.Lock()
				cleanStreak++
				n := cleanStreak
				mu.Unlock()
				if n >= 20 {
					return
				}
			}
		}
	}()
	x.Restart()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if cleanStreak < 20 {
		t.Fatalf("the restarted node never answered for every topic (%d answers)", answered)
	}
	for i, s := range bad {
		if i == 10 {
			t.Errorf("... %d more", len(bad)-10)
			break
		}
		t.Error(s)
	}
	t.Logf("%d answers from the restarted node", answered)
}

// probeCaughtUp sends one Metadata (by name) and one Fetch (by topic id)
// for every topic to b, reporting each answer that calls an existing topic
// unknown through report and each answered request through answered. It
// returns whether both answered and named every topic without error.
func probeCaughtUp(ctx context.Context, b *kgo.Broker, names []string, ids map[string][16]byte, report func(string), answered func()) bool {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		md.Topics = append(md.Topics, rt)
	}
	resp, err := md.RequestWith(rctx, b)
	if err != nil {
		time.Sleep(5 * time.Millisecond) // not listening yet
		return false
	}
	answered()
	clean := len(resp.Topics) == len(names)
	for _, rt := range resp.Topics {
		switch err := kerr.ErrorForCode(rt.ErrorCode); err {
		case nil:
		case kerr.UnknownTopicOrPartition, kerr.UnknownTopicID:
			report(fmt.Sprintf("Metadata: topic %s: %v", *rt.Topic, err))
			clean = false
		default:
			clean = false
		}
	}
	f := kmsg.NewPtrFetchRequest()
	f.Version = 13
	f.ReplicaID = -1
	f.MaxWaitMillis = 0
	f.MaxBytes = 1 << 20
	for _, n := range names {
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = ids[n]
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = 0
		fp.PartitionMaxBytes = 1 << 10
		fp.CurrentLeaderEpoch = -1
		fp.LogStartOffset = -1
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
	}
	fr, err := f.RequestWith(rctx, b)
	if err != nil {
		return false
	}
	answered()
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		return false
	}
	byID := map[[16]byte]string{}
	for n, id := range ids {
		byID[id] = n
	}
	for _, ft := range fr.Topics {
		for _, fp := range ft.Partitions {
			switch err := kerr.ErrorForCode(fp.ErrorCode); err {
			case nil, kerr.NotLeaderForPartition:
				// A follower's partition answers NOT_LEADER: the topic is known.
			case kerr.UnknownTopicOrPartition, kerr.UnknownTopicID:
				report(fmt.Sprintf("Fetch: topic %s (id %x) partition %d: %v", byID[ft.TopicID], ft.TopicID, fp.Partition, err))
				clean = false
			default:
				clean = false
			}
		}
	}
	return clean
}
