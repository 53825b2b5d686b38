package handler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// rebalanceTime starts six franz-go members of a group on topic (60
// partitions), waits until they hold every partition, then starts a
// seventh and returns how long until every partition is held again with
// the newcomer holding its share: the classic protocol with the
// cooperative-sticky balancer, or KIP-848 (server side) when kip848 is
// set. Both heartbeat every 500ms.
func rebalanceTime(t *testing.T, n *node, topic, group string, kip848 bool) time.Duration {
	const parts, members = 60, 6
	var mu sync.Mutex
	held := map[int32]string{} // partition -> member holding it
	count := func(member string) (all, mine int) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range held {
			if m == member {
				mine++
			}
		}
		return len(held), mine
	}
	var clients []*kgo.Client
	start := func(name string) {
		opts := []kgo.Opt{kgo.SeedBrokers(n.addr), kgo.ClientID(name), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(500 * time.Millisecond),
			kgo.SessionTimeout(10 * time.Second), kgo.FetchMaxWait(100 * time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range ps[topic] {
					held[p] = name
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range ps[topic] {
					if held[p] == name {
						delete(held, p)
					}
				}
			})}
		if kip848 {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
		go func() {
			for {
				if fs := cl.PollFetches(context.Background()); fs.IsClientClosed() {
					return
				}
			}
		}()
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	waitUntil := func(what string, ok func() bool) {
		deadline := time.Now().Add(60 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s never happened", group, what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range members {
		start(fmt.Sprintf("m%d", i))
	}
	waitUntil("six members holding every partition", func() bool {
		all, _ := count("")
		if all != parts {
			return false
		}
		for i := range members {
			if _, mine := count(fmt.Sprintf("m%d", i)); mine < parts/members {
				return false
			}
		}
		return true
	})
	began := time.Now()
	start("new")
	waitUntil("the newcomer holding its share", func() bool {
		all, mine := count("new")
		return all == parts && mine >= parts/(members+1)
	})
	return time.Since(began)
}

// TestRebalanceTimeClassicVsKIP848 measures, in the same run, the time
// from a seventh member joining a group of six on 60 partitions until
// every partition is held again with the newcomer holding its share:
// classic cooperative-sticky against KIP-848. It checks only that both
// complete; the numbers are logged (go test -v -run RebalanceTime).
func TestRebalanceTimeClassicVsKIP848(t *testing.T) {
	props := map[string]string{"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500"}
	for k, v := range groupProps {
		props[k] = v
	}
	n := startNode(t, "", props)
	createTopic(t, n.client(), "rebal", 60, nil)
	classic := rebalanceTime(t, n, "rebal", "classic-coop", false)
	kip848 := rebalanceTime(t, n, "rebal", "kip848", true)
	t.Logf("one member joining six on 60 partitions: classic cooperative-sticky %v, KIP-848 %v", classic, kip848)
}
