package handler

// Client quota enforcement (Kafka's ClientQuotaManager, KIP-13 and
// KIP-55; throttling as KIP-219): Produce records the request's size,
// a consumer's Fetch its response's record bytes, against the
// producer_byte_rate / consumer_byte_rate that applies to the connection's
// user and client id (internal/quota). Over the quota, the response
// carries ThrottleMillis and the connection reads no further request for
// that long. Followers' fetches are not counted (replication quotas are
// separate in Kafka and not implemented).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/quota"
)

// quotaConfig reads quota.window.num and quota.window.size.seconds.
func quotaConfig(cfg *config.Broker) quota.Config {
	return quota.Config{
		Samples: int(cfg.Int("quota.window.num", 11)),
		Window:  time.Duration(cfg.Int("quota.window.size.seconds", 1)) * time.Second,
	}
}

// throttleMillis converts a throttle time for a response field.
func throttleMillis(d time.Duration) int32 {
	return int32(min(d.Milliseconds(), int64(protocol.MaxThrottle/time.Millisecond)))
}

// withProduceQuota wraps the Produce handler: the request's size is
// recorded at once (before the append, as KafkaApis records it when the
// response is sent) and the throttle set on the response and the
// connection.
func (h *Handlers) withProduceQuota(serve protocol.HandlerFunc) protocol.HandlerFunc {
	return func(r *protocol.Request) protocol.Reply {
		reply := serve(r)
		im := h.b.Image()
		if len(im.Quotas) == 0 {
			return reply
		}
		metrics.QuotaBytes.WithLabelValues("produce").Add(float64(r.Size))
		d := h.produceQuota.Record(im.Quotas, quota.User(r.Conn.Principal()), r.ClientID, int64(r.Size), h.b.Now())
		if d <= 0 {
			return reply
		}
		metrics.QuotaThrottle.WithLabelValues("produce").Add(d.Seconds())
		// The mute starts now, on the reader goroutine, so no later
		// request of the connection is handled before it ends; this
		// response is not delayed by it (KIP-219: answer at once, then
		// mute the channel). acks=0 has no response but is muted too.
		r.Conn.Throttle(d)
		ms := throttleMillis(d)
		set := func(resp kmsg.Response) kmsg.Response {
			if pr, ok := resp.(*kmsg.ProduceResponse); ok {
				pr.ThrottleMillis = ms
			}
			return resp
		}
		switch {
		case reply.Await != nil:
			await := reply.Await
			reply.Await = func() kmsg.Response { return set(await()) }
		case reply.Resp != nil:
			reply.Resp = set(reply.Resp)
		}
		return reply
	}
}

// withFetchQuota wraps the Fetch handler: a consumer's response record
// bytes are recorded when the response is ready.
func (h *Handlers) withFetchQuota(serve protocol.HandlerFunc) protocol.HandlerFunc {
	return func(r *protocol.Request) protocol.Reply {
		reply := serve(r)
		req, ok := r.Body.(*kmsg.FetchRequest)
		if !ok {
			return reply
		}
		if id, _ := replicaOf(req); id >= 0 || len(h.b.Image().Quotas) == 0 {
			return reply
		}
		user, clientID := quota.User(r.Conn.Principal()), r.ClientID
		account := func(resp kmsg.Response) kmsg.Response {
			fr := fetchResponseOf(resp)
			if fr == nil {
				return resp
			}
			n := fetchBytes(resp, fr)
			metrics.QuotaBytes.WithLabelValues("fetch").Add(float64(n))
			d := h.fetchQuota.Record(h.b.Image().Quotas, user, clientID, n, h.b.Now())
			if d > 0 {
				metrics.QuotaThrottle.WithLabelValues("fetch").Add(d.Seconds())
				fr.ThrottleMillis = throttleMillis(d)
				r.Conn.Throttle(d)
			}
			return resp
		}
		if reply.Await != nil {
			await := reply.Await
			reply.Await = func() kmsg.Response { return account(await()) }
		} else if reply.Resp != nil {
			reply.Resp = account(reply.Resp)
		}
		return reply
	}
}

// fetchResponseOf is the FetchResponse of a fetch handler's response.
func fetchResponseOf(resp kmsg.Response) *kmsg.FetchResponse {
	switch v := resp.(type) {
	case *kmsg.FetchResponse:
		return v
	case *splicedFetch:
		return v.FetchResponse
	}
	return nil
}

// fetchBytes is the record bytes of a fetch response, spliced ones
// included.
func fetchBytes(resp kmsg.Response, fr *kmsg.FetchResponse) int64 {
	var n int64
	for _, t := range fr.Topics {
		for _, p := range t.Partitions {
			n += int64(len(p.RecordBatches))
		}
	}
	if sp, ok := resp.(protocol.Spliced); ok {
		for _, s := range sp.Splices() {
			n += s.Len
		}
	}
	return n
}
