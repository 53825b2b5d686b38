package protocol

// Connection limits (Kafka's SocketServer.ConnectionQuotas): the broker
// limit max.connections, the per-IP limit max.connections.per.ip with its
// per-host overrides max.connections.per.ip.overrides, and the broker
// connection creation rate max.connection.creation.rate (KIP-612). They
// are checked in the accept loop, before a connection has a goroutine.

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxPerIPOverrides bounds the entries of max.connections.per.ip.overrides.
const MaxPerIPOverrides = 10000

// ParsePerIPOverrides parses max.connections.per.ip.overrides,
// "host:count,..." (Kafka's format): each host is an IP address or a
// name, resolved once here as Kafka resolves it when the setting is read.
// The result maps IP addresses (net.IP.String) to their limits.
func ParsePerIPOverrides(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		i := strings.LastIndexByte(e, ':')
		if i <= 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q is not host:count", e)
		}
		host, num := strings.Trim(e[:i], "[]"), e[i+1:]
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q: count must be a non-negative integer", e)
		}
		ips := []net.IP{net.ParseIP(host)}
		if ips[0] == nil {
			if ips, err = net.LookupIP(host); err != nil {
				return nil, fmt.Errorf("max.connections.per.ip.overrides: %q: %v", e, err)
			}
		}
		for _, ip := range ips {
			out[ip.String()] = n
		}
		if len(out) > MaxPerIPOverrides {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: more than %d hosts", MaxPerIPOverrides)
		}
	}
	return out, nil
}

// connQuotas counts open connections per remote IP and paces accepts.
// Its methods are called with Server.mu held, except wait.
type connQuotas struct {
	maxPerIP  int
	overrides map[string]int
	perIP     map[string]int

	// The creation-rate limit is a token bucket refilled at rate tokens
	// per second holding at most max(rate, 1): over any second no more
	// than about rate connections are accepted (Kafka measures the rate
	// over quota.window.num windows; the bucket is the same bound
	// without a burst longer than a second).
	rateMu sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

func newConnQuotas(cfg *Config) *connQuotas {
	return &connQuotas{maxPerIP: cfg.MaxConnectionsPerIP, overrides: cfg.MaxConnectionsPerIPOverrides,
		perIP: map[string]int{}, rate: cfg.MaxConnectionCreationRate, tokens: max(cfg.MaxConnectionCreationRate, 1)}
}

// ipOf is the text form of a connection's remote IP ("" if it has none,
// e.g. a pipe in tests: such connections are not counted per IP).
func ipOf(nc net.Conn) string {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return ""
}

// limitFor is the per-IP limit of ip.
func (q *connQuotas) limitFor(ip string) int {
	if n, ok := q.overrides[ip]; ok {
		return n
	}
	return q.maxPerIP
}

// inc counts a new connection from ip, or reports false when ip is at its
// limit (Kafka's TooManyConnectionsException: the connection is closed).
func (q *connQuotas) inc(ip string) bool {
	if ip == "" {
		return true
	}
	if q.perIP[ip] >= q.limitFor(ip) {
		return false
	}
	q.perIP[ip]++
	return true
}

// setRate changes the creation-rate limit; the bucket keeps its tokens
// up to the new size.
func (q *connQuotas) setRate(rate float64) {
	q.rateMu.Lock()
	defer q.rateMu.Unlock()
	q.rate = rate
	q.tokens = min(q.tokens, max(rate, 1))
}

// dec forgets a closed connection from ip.
func (q *connQuotas) dec(ip string) {
	if ip == "" {
		return
	}
	if q.perIP[ip]--; q.perIP[ip] <= 0 {
		delete(q.perIP, ip)
	}
}

// delay takes a token for one new connection and returns how long the
// acceptor must wait first (0 without a rate limit or with a token to
// spare). As Kafka's acceptor does when the broker's connection creation
// rate is over its quota, the caller sleeps before accepting more, so
// waiting clients queue in the listen backlog.
func (q *connQuotas) delay(now time.Time) time.Duration {
	q.rateMu.Lock()
	defer q.rateMu.Unlock()
	if q.rate <= 0 || math.IsInf(q.rate, 1) {
		return 0
	}
	if !q.last.IsZero() {
		q.tokens = min(q.tokens+now.Sub(q.last).Seconds()*q.rate, max(q.rate, 1))
	}
	q.last = now
	q.tokens--
	if q.tokens >= 0 {
		return 0
	}
	return time.Duration(-q.tokens / q.rate * float64(time.Second))
}
