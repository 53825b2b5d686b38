package handler

// Client quota enforcement (Kafka's ClientQuotaManager, KIP-13 and
// KIP-55; throttling as KIP-219): Produce records the request's size,
// a consumer's Fetch its response's record bytes, against the
// producer_byte_rate / consumer_byte_rate that applies to the connection's
// user and client id (internal/quota). Over the quota, the response
// carries ThrottleMillis and the connection reads no further request for
// that long. Followers' fetches are not counted (replication quotas are
// separate in Kafka, replquota.go in package broker).
//
// request_percentage (KIP-124, ClientRequestQuotaManager): the time the
// protocol layer measures for each request (its handler's time, then the
// encoding and writing of its response) is recorded as a percentage of
// one thread (recordRequestTime); over the quota the response carries
// the larger of its throttles and the connection is muted, the throttle
// being at most one quota.window.size.seconds. Cluster actions are exempt
// (requestExempt), as are acks=0 produces (KafkaApis'
// sendNoOpResponseExemptThrottle). A consumer's Fetch is decided with
// its byte rate when its response is made (fetchThrottle): throttled by
// either quota, it is answered empty and its bytes are not recorded
// (KafkaApis.handleFetchRequest, getThrottledResponse).

import (
	"math"
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

// requestExempt reports whether r is exempt from request_percentage:
// the cluster actions (Kafka's ApiKeys with clusterAction, answered with
// sendResponseExemptThrottle: a follower's Fetch, WriteTxnMarkers,
// LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
// AlterPartition, Envelope, BrokerRegistration, BrokerHeartbeat), an
// acks=0 Produce, and SaslHandshake / SaslAuthenticate (authentication,
// which Kafka's SaslServerAuthenticator does outside the request
// handlers).
func requestExempt(r *protocol.Request) bool {
	switch r.Key {
	case 4, 5, 6, 7, 17, 27, 36, 56, 58, 62, 63:
		return true
	case 0:
		pr, ok := r.Body.(*kmsg.ProduceRequest)
		return ok && pr.Acks == 0
	case 1:
		fr, ok := r.Body.(*kmsg.FetchRequest)
		if !ok {
			return true
		}
		id, _ := replicaOf(fr)
		return id >= 0
	}
	return false
}

// recordRequestTime is the protocol.RequestTimeFunc: d recorded against
// the request_percentage of r's user and client id. A consumer's Fetch
// is throttled by fetchThrottle instead, with its byte rate; only the
// time of writing its response is recorded here.
func (h *Handlers) recordRequestTime(r *protocol.Request, d time.Duration, throttle bool) time.Duration {
	if requestExempt(r) {
		return 0
	}
	quotas := h.b.Image().Quotas
	if len(quotas) == 0 || (throttle && r.Key == 1) {
		return 0
	}
	t := h.requestQuota.RecordValue(quotas, quota.User(r.Conn.Principal()), r.ClientID, quota.Percent(d), h.b.Now())
	if !throttle || t <= 0 {
		return 0
	}
	metrics.QuotaThrottle.WithLabelValues("request").Add(t.Seconds())
	return t
}

// fetchThrottle records a consumer fetch's record bytes and its
// handler's time so far against consumer_byte_rate and
// request_percentage and returns the larger throttle (KafkaApis
// records both when the response is made). Throttled, the bytes are
// taken back (the response goes out empty) and the connection muted.
func (h *Handlers) fetchThrottle(r *protocol.Request, req *kmsg.FetchRequest, n int64) time.Duration {
	if id, _ := replicaOf(req); id >= 0 {
		return 0
	}
	quotas := h.b.Image().Quotas
	if len(quotas) == 0 {
		return 0
	}
	user, clientID, now := quota.User(r.Conn.Principal()), r.ClientID, h.b.Now()
	metrics.QuotaBytes.WithLabelValues("fetch").Add(float64(n))
	bytesT := h.fetchQuota.Record(quotas, user, clientID, n, now)
	reqT := h.requestQuota.RecordValue(quotas, user, clientID, quota.Percent(r.HandlerTime()), now)
	d := max(bytesT, reqT)
	if d <= 0 {
		return 0
	}
	h.fetchQuota.Unrecord(quotas, user, clientID, n, now)
	if bytesT > reqT {
		metrics.QuotaThrottle.WithLabelValues("fetch").Add(d.Seconds())
	} else {
		metrics.QuotaThrottle.WithLabelValues("request").Add(d.Seconds())
	}
	r.Conn.Throttle(d)
	return d
}

// capFetchToQuota bounds a consumer fetch's MaxBytes (and MinBytes) to
// what its consumer_byte_rate lets through in one quota window with
// nothing recorded before (KafkaApis.handleFetchRequest's
// maxQuotaWindowBytes): a larger response would be throttled, and so
// answered empty, every time. The first batch is still returned whole
// (KIP-74).
func (h *Handlers) capFetchToQuota(r *protocol.Request, req *kmsg.FetchRequest) {
	if id, _ := replicaOf(req); id >= 0 {
		return
	}
	quotas := h.b.Image().Quotas
	if len(quotas) == 0 {
		return
	}
	limit, ok := h.fetchQuota.MaxInWindow(quotas, quota.User(r.Conn.Principal()), r.ClientID)
	if !ok {
		return
	}
	budget := int64(min(max(limit, 1), float64(math.MaxInt32)))
	if req.MaxBytes <= 0 || int64(req.MaxBytes) > budget {
		req.MaxBytes = int32(budget)
	}
	req.MinBytes = min(req.MinBytes, req.MaxBytes)
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
		return reply.Map(func(resp kmsg.Response) kmsg.Response {
			if pr, ok := resp.(*kmsg.ProduceResponse); ok {
				pr.ThrottleMillis = ms
			}
			return resp
		})
	}
}
