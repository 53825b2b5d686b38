// Package quota enforces client quotas as Kafka's ClientQuotaManager does
// (KIP-13, KIP-55, KIP-219): each request's bytes (producer_byte_rate,
// consumer_byte_rate) or handling time (request_percentage, KIP-124, as
// ClientRequestQuotaManager) are recorded in a rate over quota.window.num
// samples of quota.window.size.seconds, kept per quota entity; when the
// rate is over the entity's quota the request gets a throttle time,
// returned in the response, for which the broker then stops reading from
// the connection.
package quota

import (
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/metadata"
)

// MaxSensors bounds the rate sensors kept; beyond it sensors idle for a
// full window set are dropped, and if none is, new entities are not
// throttled until some are (Kafka expires idle sensors after an hour).
const MaxSensors = 100000

// Config is the sampling of the rates.
type Config struct {
	// Samples is quota.window.num (default 11, at least 2 here so the
	// rate always spans a full window).
	Samples int
	// Window is quota.window.size.seconds (default 1 s).
	Window time.Duration
}

// Manager keeps the rates of one quota type (produce, fetch or request).
type Manager struct {
	key     string // metadata.QuotaProducerByteRate, QuotaConsumerByteRate or QuotaRequestPercentage
	samples int
	window  time.Duration
	// maxThrottle bounds a throttle time: MaxThrottle, or one window for
	// request_percentage (ClientRequestQuotaManager's maxThrottleTimeMs).
	maxThrottle time.Duration

	mu      sync.Mutex
	sensors map[sensorKey]*sensor
	// idx is im.Quotas by entity, rebuilt when the image's slice changes.
	idx    map[metadata.QuotaEntity]map[string]float64
	idxSrc *metadata.ClientQuota
	idxLen int
}

// New returns a manager of the quota key (producer_byte_rate,
// consumer_byte_rate or request_percentage).
func New(key string, cfg Config) *Manager {
	if cfg.Samples < 2 {
		cfg.Samples = 2
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Second
	}
	m := &Manager{key: key, samples: cfg.Samples, window: cfg.Window, maxThrottle: MaxThrottle, sensors: map[sensorKey]*sensor{}}
	if key == metadata.QuotaRequestPercentage {
		m.maxThrottle = min(cfg.Window, MaxThrottle)
	}
	return m
}

// Percent is the value request_percentage records for d of handling
// time: percent of one thread for a second (ClientRequestQuotaManager's
// nanosToPercentage), so that its rate per second is the percentage of
// one thread used.
func Percent(d time.Duration) float64 { return float64(d) * 100 / float64(time.Second) }

// MaxThrottle bounds a throttle time. Kafka's ClientQuotaManager does
// not bound it: a burst larger than the sampled span must be paid in
// full, or it would be forgotten once its samples are purged.
const MaxThrottle = time.Minute

// span is the time the samples cover.
func (m *Manager) span() time.Duration { return time.Duration(m.samples) * m.window }

// sensorKey is what a rate is kept per: the user and client id of the
// quota that applies, "" for a part it does not depend on.
type sensorKey struct{ user, clientID string }

// User is the quota user of a principal "User:<name>" (Kafka's
// KafkaPrincipal.getName).
func User(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}

// lookup finds the quota of (user, clientID) in the order of KIP-55
// (DefaultQuotaCallback): user+client, user+default client, user,
// default user+client, default user+default client, default user, client,
// default client. It returns the quota and the key its rate is kept by.
func (m *Manager) lookup(quotas []metadata.ClientQuota, user, clientID string) (float64, sensorKey, bool) {
	if len(quotas) == 0 {
		return 0, sensorKey{}, false
	}
	if m.idxSrc != &quotas[0] || m.idxLen != len(quotas) {
		m.idx = make(map[metadata.QuotaEntity]map[string]float64, len(quotas))
		for _, q := range quotas {
			m.idx[q.Entity] = q.Values
		}
		m.idxSrc, m.idxLen = &quotas[0], len(quotas)
	}
	u := metadata.QuotaName{Set: true, Name: user}
	du := metadata.QuotaName{Set: true, Default: true}
	c := metadata.QuotaName{Set: true, Name: clientID}
	dc := metadata.QuotaName{Set: true, Default: true}
	none := metadata.QuotaName{}
	both := sensorKey{user, clientID}
	for _, try := range []struct {
		e metadata.QuotaEntity
		k sensorKey
	}{
		{metadata.QuotaEntity{User: u, ClientID: c}, both},
		{metadata.QuotaEntity{User: u, ClientID: dc}, both},
		{metadata.QuotaEntity{User: u, ClientID: none}, sensorKey{user: user}},
		{metadata.QuotaEntity{User: du, ClientID: c}, both},
		{metadata.QuotaEntity{User: du, ClientID: dc}, both},
		{metadata.QuotaEntity{User: du, ClientID: none}, sensorKey{user: user}},
		{metadata.QuotaEntity{User: none, ClientID: c}, sensorKey{clientID: clientID}},
		{metadata.QuotaEntity{User: none, ClientID: dc}, sensorKey{clientID: clientID}},
	} {
		if v, ok := m.idx[try.e][m.key]; ok {
			return v, try.k, true
		}
	}
	return 0, sensorKey{}, false
}

// Record records n bytes of a request by (user, clientID) at now, against
// the quotas of the image, and returns the throttle time: zero when the
// rate is within the quota or there is none, else Kafka's
// (rate - quota) / quota * window span (QuotaUtils.throttleTime), at
// most MaxThrottle (one window for request_percentage).
func (m *Manager) Record(quotas []metadata.ClientQuota, user, clientID string, n int64, now time.Time) time.Duration {
	return m.RecordValue(quotas, user, clientID, float64(n), now)
}

// RecordValue is Record of a value that need not be whole (request
// time, Percent).
func (m *Manager) RecordValue(quotas []metadata.ClientQuota, user, clientID string, v float64, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	limit, k, ok := m.lookup(quotas, user, clientID)
	if !ok {
		return 0
	}
	s := m.sensors[k]
	if s == nil {
		if len(m.sensors) >= MaxSensors {
			m.expire(now)
			if len(m.sensors) >= MaxSensors {
				return 0
			}
		}
		s = &sensor{vals: make([]float64, m.samples), starts: make([]time.Time, m.samples)}
		m.sensors[k] = s
	}
	rate, span := s.record(v, now, m.window)
	if rate <= limit {
		return 0
	}
	d := time.Duration((rate - limit) / limit * float64(span))
	return min(d, m.maxThrottle)
}

// MaxInWindow is the most (user, clientID) can record at once, with
// nothing recorded before, without being throttled: its quota times
// quota.window.num - 1 windows (ClientQuotaManager's
// getMaxValueInQuotaWindow). ok is false when no quota applies.
func (m *Manager) MaxInWindow(quotas []metadata.ClientQuota, user, clientID string) (float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	limit, _, ok := m.lookup(quotas, user, clientID)
	if !ok {
		return 0, false
	}
	return limit * float64(m.samples-1) * m.window.Seconds(), true
}

// Unrecord takes back n bytes recorded at now (a throttled fetch returns
// no data, so its bytes do not count, as in Kafka's KafkaApis).
func (m *Manager) Unrecord(quotas []metadata.ClientQuota, user, clientID string, n int64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, k, ok := m.lookup(quotas, user, clientID); ok {
		if s := m.sensors[k]; s != nil {
			s.record(-float64(n), now, m.window)
		}
	}
}

// expire drops sensors idle for longer than their samples and any
// throttle they gave.
func (m *Manager) expire(now time.Time) {
	for k, s := range m.sensors {
		if now.Sub(s.last) > max(m.span(), MaxThrottle) {
			delete(m.sensors, k)
		}
	}
}

// sensor is Kafka's Rate over a SampledStat: samples windows, each with
// its start and its sum.
type sensor struct {
	vals   []float64
	starts []time.Time
	cur    int
	last   time.Time
}

// record adds v at now and returns the rate per second and the span it
// is measured over (Rate.windowSize: from the oldest sample's start,
// padded to samples-1 full windows).
func (s *sensor) record(v float64, now time.Time, window time.Duration) (float64, time.Duration) {
	n := len(s.vals)
	if s.starts[s.cur].IsZero() {
		s.starts[s.cur] = now
	} else if now.Sub(s.starts[s.cur]) >= window {
		s.cur = (s.cur + 1) % n
		s.vals[s.cur], s.starts[s.cur] = 0, now
	}
	s.vals[s.cur] += v
	s.last = now
	// Purge samples older than the whole span (SampledStat.purgeObsoleteSamples).
	total, oldest := 0.0, now
	for i := range s.vals {
		if s.starts[i].IsZero() {
			continue
		}
		if now.Sub(s.starts[i]) >= time.Duration(n)*window {
			s.vals[i], s.starts[i] = 0, time.Time{}
			continue
		}
		total += s.vals[i]
		if s.starts[i].Before(oldest) {
			oldest = s.starts[i]
		}
	}
	span := now.Sub(oldest)
	if full := time.Duration(n-1) * window; span < full {
		span = full + span%window
	}
	return total / span.Seconds(), span
}
