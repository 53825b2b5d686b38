package groups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// --- franz-go: cooperative-sticky, autocommit ---

type franzMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startFranz(t *testing.T, c *cluster, name, group, topic string, rec *recorder) member {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs(true)...), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond), debugLogger(name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &franzMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachError(func(tp string, p int32, err error) { t.Logf("%s: fetch %s/%d: %v", name, tp, p, err) })
			fs.EachRecord(func(r *kgo.Record) { rec.add(name, string(r.Value)) })
		}
	}()
	t.Cleanup(func() { m.cancel(); cl.Close() })
	return m
}

func (m *franzMember) stop(t *testing.T) {
	m.cancel()
	<-m.done
	// Close commits what was polled (autocommit) and leaves the group.
	m.cl.Close()
}

func TestMembershipFranzGo(t *testing.T) { runMembership(t, startFranz) }

// debugLogger logs franz-go's client at info level when GROUPS_DEBUG is set.
func debugLogger(name string) kgo.Opt {
	if os.Getenv("GROUPS_DEBUG") == "" {
		return kgo.WithLogger(nil)
	}
	return kgo.WithLogger(kgo.BasicLogger(os.Stderr, debugLevel(), func() string {
		return time.Now().Format("15:04:05.000 ") + name + " "
	}))
}

// --- sarama: ConsumerGroup, autocommit of marked messages ---

type saramaHandler struct {
	name string
	rec  *recorder
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
			h.rec.add(h.name, string(msg.Value))
			sess.MarkMessage(msg, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}

type saramaMember struct {
	cg     sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
}

func startSarama(t *testing.T, c *cluster, name, group, topic string, rec *recorder) member {
	cfg := sarama.NewConfig()
	cfg.ClientID = name
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	cfg.Consumer.MaxWaitTime = 200 * time.Millisecond
	cg, err := sarama.NewConsumerGroup(c.Addrs(true), group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{cg: cg, cancel: cancel, done: make(chan struct{})}
	h := &saramaHandler{name: name, rec: rec}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				t.Logf("%s: consume: %v", name, err)
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() { m.cancel(); cg.Close() })
	return m
}

func (m *saramaMember) stop(t *testing.T) {
	m.cancel()
	<-m.done
	// Close commits the marked offsets and leaves the group.
	if err := m.cg.Close(); err != nil {
		t.Errorf("sarama close: %v", err)
	}
}

func TestMembershipSarama(t *testing.T) { runMembership(t, startSarama) }

// --- segmentio/kafka-go: Reader with GroupID, periodic commits ---

type kafkagoMember struct {
	r      *kafkago.Reader
	cancel context.CancelFunc
	done   chan struct{}
}

func startKafkaGo(t *testing.T, c *cluster, name, group, topic string, rec *recorder) member {
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: c.Addrs(true), GroupID: group, Topic: topic,
		Dialer:   &kafkago.Dialer{ClientID: name, Timeout: 10 * time.Second},
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond,
		StartOffset: kafkago.FirstOffset, CommitInterval: 200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second,
		RebalanceTimeout: 20 * time.Second, JoinGroupBackoff: 200 * time.Millisecond,
		ErrorLogger: kafkago.LoggerFunc(func(f string, args ...any) {
			if os.Getenv("GROUPS_DEBUG") != "" {
				fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+name+" kafka-go error: "+f+"\n", args...)
			}
		}),
	})
	ctx, cancel := context.WithCancel(context.Background())
	m := &kafkagoMember{r: r, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			msg, err := r.ReadMessage(ctx)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("%s: read: %v", name, err)
				}
				return
			}
			rec.add(name, string(msg.Value))
		}
	}()
	t.Cleanup(func() { m.cancel(); r.Close() })
	return m
}

func (m *kafkagoMember) stop(t *testing.T) {
	m.cancel()
	<-m.done
	// Close flushes the pending commits and leaves the group.
	if err := m.r.Close(); err != nil {
		t.Errorf("kafka-go close: %v", err)
	}
}

func TestMembershipKafkaGo(t *testing.T) { runMembership(t, startKafkaGo) }

func debugLevel() kgo.LogLevel {
	if os.Getenv("GROUPS_DEBUG") == "debug" {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelInfo
}
