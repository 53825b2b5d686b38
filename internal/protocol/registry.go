// Package protocol is sluice's Kafka wire-protocol layer: length-prefixed
// framing, request headers v0/v1/v2, per-connection pipelining with responses
// in request order, size limits, and dispatch to a registry of handlers from
// which ApiVersions is derived. Message bodies are encoded and decoded by
// franz-go's kmsg; nothing here hand-writes a request or response codec.
package protocol

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Reply is what a handler returns for one request. Exactly one of Resp or
// Await is normally set.
type Reply struct {
	// Resp is a ready response.
	Resp kmsg.Response
	// Await, if set, is called on the connection's writer goroutine, in
	// request order, and may block (an fsync, a long-poll fetch, acks=all).
	// Requests that follow on the same connection are read and handled
	// meanwhile; their responses wait behind this one.
	Await func() kmsg.Response
	// NoResponse means the request gets no response (Produce with acks=0).
	NoResponse bool
	// Close closes the connection once earlier responses are written (Kafka
	// closes the connection on an acks=0 produce error so the client
	// refreshes its metadata).
	Close bool
}

// Map returns the reply with f applied to its response, whether it is
// ready (Resp) or comes later (Await).
func (r Reply) Map(f func(kmsg.Response) kmsg.Response) Reply {
	switch {
	case r.Await != nil:
		await := r.Await
		r.Await = func() kmsg.Response { return f(await()) }
	case r.Resp != nil:
		r.Resp = f(r.Resp)
	}
	return r
}

// Request is one decoded request handed to a handler.
type Request struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
	// Size is the request's length on the wire, without its size
	// prefix (what produce quotas record).
	Size int
	Body kmsg.Request
	// Conn identifies the connection (for fetch sessions and logs).
	Conn *Conn

	// start is when the handler was called; served how long it ran
	// (HandlerTime), set once it returned.
	start  time.Time
	served time.Duration
	// frame is the pooled buffer the request was read into, until
	// ReleaseFrame gives it back (nil: not pooled, or given back).
	frame atomic.Pointer[[]byte]
}

// ReleaseFrame tells the connection that nothing reads the request's bytes
// any more (Body's byte fields point into them: a produce request's
// records): its buffer may hold a later request. A handler calls it once
// everything it started with those bytes is done (a produce request's
// batches written to the log, or refused), or never; calls after the first
// do nothing. Nothing may read Body's byte fields after it.
func (r *Request) ReleaseFrame() {
	if b := r.frame.Swap(nil); b != nil {
		putFrame(*b)
	}
}

// HandlerTime is the time the request's handler spent on it: the time
// its HandlerFunc ran, or, called from within it, the time so far. An
// Await's waiting is not counted, as Kafka's requestThreadTimeNanos does
// not count a delayed operation's time in purgatory.
func (r *Request) HandlerTime() time.Duration {
	if r.served > 0 || r.start.IsZero() {
		return r.served
	}
	return time.Since(r.start)
}

// RequestTimeFunc records the time spent on a request against its
// client's request_percentage quota (KIP-124, Kafka's
// ClientRequestQuotaManager): d is the handler's time (HandlerTime) when
// throttle is set, then the time spent encoding and writing its response
// (Kafka's network-thread time, recorded without a throttle). It returns
// the throttle time, zero for none or when throttle is false; the
// protocol layer then mutes the connection (Conn.Throttle) and puts the
// throttle in the response's ThrottleMillis unless a larger one is there.
type RequestTimeFunc func(r *Request, d time.Duration, throttle bool) time.Duration

// HandlerFunc serves one request. It runs on the connection's reader
// goroutine, so requests of one connection are handled in order; anything
// slow belongs in Reply.Await.
type HandlerFunc func(r *Request) Reply

// Handler is a registered API: its key, the versions it serves and the
// function serving them.
type Handler struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
	Serve      HandlerFunc
	// Hidden, if set, leaves the API out of ApiVersions while it returns
	// true (an API gated by a feature level, as Kafka hides
	// ConsumerGroupHeartbeat below group.version 1); requests are still
	// served, and the handler answers them as Kafka does then.
	Hidden func() bool
}

// Registry maps API keys to handlers. It is built once at startup and read
// concurrently afterwards.
type Registry struct {
	handlers map[int16]Handler
	features []Feature
	// requestTime records request times (SetRequestTime).
	requestTime RequestTimeFunc
}

// SetRequestTime installs the request-time recorder (at startup, like
// Register). SASL exchanges before authentication are not recorded
// (Kafka's SaslServerAuthenticator handles them on the network thread).
func (r *Registry) SetRequestTime(f RequestTimeFunc) { r.requestTime = f }

// Feature is a feature advertised in ApiVersions v3+ (KIP-584): the
// levels this node supports and the level finalized for the cluster (0:
// not finalized, not listed).
type Feature struct {
	Name      string
	Min, Max  int16
	Finalized int16
	// Level, if set, gives the finalized level at each request instead
	// of Finalized (a level the cluster can change, UpdateFeatures), with
	// the epoch of the metadata that finalized it.
	Level func() (level int16, epoch int64)
}

// SetFeature adds or replaces a feature (at startup, like Register).
func (r *Registry) SetFeature(f Feature) {
	for i := range r.features {
		if r.features[i].Name == f.Name {
			r.features[i] = f
			return
		}
	}
	r.features = append(r.features, f)
}

// NewRegistry returns a registry with ApiVersions, SaslHandshake and
// SaslAuthenticate registered (sasl.go).
func NewRegistry() *Registry {
	r := &Registry{handlers: make(map[int16]Handler)}
	r.Register(Handler{Key: apiVersionsKey, MinVersion: 0, MaxVersion: 3, Serve: r.serveAPIVersions})
	r.registerSASL()
	return r
}

// Register adds or replaces a handler. Versions above what kmsg can encode
// are clamped.
func (r *Registry) Register(h Handler) {
	if req := kmsg.RequestForKey(h.Key); req != nil && h.MaxVersion > req.MaxVersion() {
		h.MaxVersion = req.MaxVersion()
	}
	r.handlers[h.Key] = h
}

// Lookup returns the handler for key.
func (r *Registry) Lookup(key int16) (Handler, bool) {
	h, ok := r.handlers[key]
	return h, ok
}

// Keys returns the registered keys in ascending order.
func (r *Registry) Keys() []int16 {
	keys := make([]int16, 0, len(r.handlers))
	for k := range r.handlers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

const apiVersionsKey = 18

// apiVersionsResponse lists every registered handler's version range.
func (r *Registry) apiVersionsResponse(version int16, errCode int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	resp.ErrorCode = errCode
	for _, k := range r.Keys() {
		h := r.handlers[k]
		if h.Hidden != nil && h.Hidden() {
			continue
		}
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{
			ApiKey: h.Key, MinVersion: h.MinVersion, MaxVersion: h.MaxVersion,
		})
	}
	for _, f := range r.features {
		sf := kmsg.NewApiVersionsResponseSupportedFeature()
		sf.Name, sf.MinVersion, sf.MaxVersion = f.Name, f.Min, f.Max
		resp.SupportedFeatures = append(resp.SupportedFeatures, sf)
		level, epoch := f.Finalized, int64(1)
		if f.Level != nil {
			level, epoch = f.Level()
		}
		if level > 0 {
			ff := kmsg.NewApiVersionsResponseFinalizedFeature()
			ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = f.Name, level, level
			resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
			resp.FinalizedFeaturesEpoch = max(resp.FinalizedFeaturesEpoch, epoch)
		}
	}
	return resp
}

// serveAPIVersions answers ApiVersions v0-v3 (KIP-35, KIP-511). The handler
// list is derived from the registry, so advertising an API means serving it.
func (r *Registry) serveAPIVersions(req *Request) Reply {
	return Reply{Resp: r.apiVersionsResponse(req.Version, 0)}
}
