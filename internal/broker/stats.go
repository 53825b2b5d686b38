package broker

import (
	"sync"
	"sync/atomic"
)

// TopicCounters are one topic's cumulative produce and fetch totals on
// this node since the process started: what Kafka's per-topic
// BrokerTopicMetrics meter (BytesInPerSec, MessagesInPerSec,
// BytesOutPerSec). Produce counts batches appended by this node as
// leader; fetch counts record bytes and records returned to consumers
// (follower fetches are replication traffic and are left out, as Kafka
// leaves them out of the per-topic BytesOutPerSec).
type TopicCounters struct {
	BytesIn    int64 `json:"bytesIn"`
	RecordsIn  int64 `json:"recordsIn"`
	BytesOut   int64 `json:"bytesOut"`
	RecordsOut int64 `json:"recordsOut"`
}

// topicCounters is the lock-free live form of TopicCounters.
type topicCounters struct {
	bytesIn, recordsIn, bytesOut, recordsOut atomic.Int64
}

// topicStats maps a topic name to its *topicCounters.
type topicStats struct{ m sync.Map }

func (s *topicStats) get(topic string) *topicCounters {
	if c, ok := s.m.Load(topic); ok {
		return c.(*topicCounters)
	}
	c, _ := s.m.LoadOrStore(topic, &topicCounters{})
	return c.(*topicCounters)
}

// CountProduce adds one appended batch of the topic to its counters.
func (b *Broker) CountProduce(topic string, bytes, records int64) {
	c := b.stats.get(topic)
	c.bytesIn.Add(bytes)
	c.recordsIn.Add(records)
}

// CountFetch adds record bytes and records returned to a consumer.
func (b *Broker) CountFetch(topic string, bytes, records int64) {
	if bytes == 0 && records == 0 {
		return
	}
	c := b.stats.get(topic)
	c.bytesOut.Add(bytes)
	c.recordsOut.Add(records)
}

// TopicCounters returns every counted topic's totals.
func (b *Broker) TopicCounters() map[string]TopicCounters {
	out := map[string]TopicCounters{}
	b.stats.m.Range(func(k, v any) bool {
		c := v.(*topicCounters)
		out[k.(string)] = TopicCounters{BytesIn: c.bytesIn.Load(), RecordsIn: c.recordsIn.Load(),
			BytesOut: c.bytesOut.Load(), RecordsOut: c.recordsOut.Load()}
		return true
	})
	return out
}
