package handler_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
)

// saramaHandler counts records, marking each for sarama's autocommit.
type saramaHandler struct {
	mu    sync.Mutex
	seen  map[string]int
	total int
	done  chan struct{}
	once  sync.Once
}

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			sess.MarkMessage(msg, "")
			h.mu.Lock()
			h.seen[string(msg.Value)]++
			n := len(h.seen)
			h.mu.Unlock()
			if n == h.total {
				h.once.Do(func() { close(h.done) })
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

// TestSaramaConsumerGroup consumes a topic with sarama's ConsumerGroup at
// its default protocol level (2.8: JoinGroup v7, SyncGroup v5, OffsetCommit
// v8, OffsetFetch v7) and an older one (2.1: JoinGroup v3, OffsetCommit v6).
func TestSaramaConsumerGroup(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{sarama.V2_8_0_0, sarama.V2_1_0_0} {
		t.Run(v.String(), func(t *testing.T) {
			n := startNode(t, "", groupProps)
			topic, group := "sarama-"+v.String(), "sarama-group-"+v.String()
			const total = 1000
			createTopic(t, n.client(), topic, 4, nil)
			produceN(t, n, topic, 0, total)

			cfg := sarama.NewConfig()
			cfg.Version = v
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			// Autocommit retries a commit that failed (see the note on
			// empty fetches in docs/groups.md).
			cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
			cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
			cg, err := sarama.NewConsumerGroup([]string{n.addr}, group, cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := &saramaHandler{seen: map[string]int{}, total: total, done: make(chan struct{})}
			c, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				for c.Err() == nil {
					if err := cg.Consume(c, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			select {
			case <-h.done:
			case err := <-errc:
				t.Fatalf("consume: %v", err)
			case <-time.After(30 * time.Second):
				h.mu.Lock()
				t.Fatalf("consumed %d of %d", len(h.seen), total)
			}
			checkCommittedAtEnd(t, n, group, topic)
			cancel()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if err := cg.Close(); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			for i := 0; i < total; i++ {
				if k := h.seen[strconv.Itoa(i)]; k != 1 {
					t.Errorf("record %d consumed %d times", i, k)
				}
			}
		})
	}
}

// TestKafkaGoReaderGroup consumes a topic with segmentio/kafka-go's Reader
// in a group: FindCoordinator v0, JoinGroup v1/v2, SyncGroup v0, Heartbeat
// v0, OffsetCommit v2, OffsetFetch v1, LeaveGroup v0.
func TestKafkaGoReaderGroup(t *testing.T) {
	n := startNode(t, "", groupProps)
	const topic, group, total = "kgo-reader", "kafkago-group", 500
	createTopic(t, n.client(), topic, 3, nil)
	produceN(t, n, topic, 0, total)

	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: []string{n.addr}, GroupID: group, Topic: topic,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond,
		StartOffset: kafkago.FirstOffset, HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second,
	})
	seen := map[string]int{}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(seen) < total {
		m, err := r.ReadMessage(c) // commits synchronously (CommitInterval 0)
		if err != nil {
			t.Fatalf("after %d records: %v", len(seen), err)
		}
		seen[string(m.Value)]++
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i++ {
		if k := seen[strconv.Itoa(i)]; k != 1 {
			t.Errorf("record %d consumed %d times", i, k)
		}
	}
	checkCommittedAtEnd(t, n, group, topic)
}
