package fetchsession

import (
	"bytes"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Client is the fetcher's side of a session with one leader (Kafka's
// FetchSessionHandler): it turns the partitions wanted in the next fetch
// into a full or an incremental request, and follows the session from the
// responses. Not safe for concurrent use; one request is in flight at a
// time.
type Client struct {
	id    int32 // 0: no session
	epoch int32 // the next request's epoch: 0 full (create), >0 incremental
	// session is what the leader caches for the session: every partition
	// of the last request's plan with the parameters it last received.
	session map[Key]Request
}

// Plan is the session part of the next request.
type Plan struct {
	SessionID, Epoch int32
	// Full: Send holds every partition wanted, and the leader answers
	// every one.
	Full bool
	// Send are the partitions to name in the request: all of them in a
	// full fetch; in an incremental one those added to the session or
	// whose request changed (a follower's fetch offset is its
	// acknowledgement, so a changed offset is always sent).
	Send []Key
	// Forget are the session's partitions no longer wanted.
	Forget []Key
}

// Build plans the next request for the partitions in next (Kafka's
// FetchSessionHandler.Builder.build). The session is assumed to hold next
// from now on; a failed request must be reported with HandleError.
func (c *Client) Build(next map[Key]Request) Plan {
	p := Plan{SessionID: c.id, Epoch: c.epoch, Full: c.epoch == 0}
	if p.Full || c.session == nil {
		p.Full, p.Epoch = true, 0
		for k := range next {
			p.Send = append(p.Send, k)
		}
	} else {
		for k, r := range next {
			if old, ok := c.session[k]; !ok || old != r {
				p.Send = append(p.Send, k)
			}
		}
		for k := range c.session {
			if _, ok := next[k]; !ok {
				p.Forget = append(p.Forget, k)
			}
		}
	}
	s := make(map[Key]Request, len(next))
	for k, r := range next {
		s[k] = r
	}
	c.session = s
	// In a stable order (Kafka's builder keeps insertion order): the same
	// partitions make the same request, and a simulator replays it.
	slices.SortFunc(p.Send, compareKeys)
	slices.SortFunc(p.Forget, compareKeys)
	return p
}

func compareKeys(a, b Key) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// HandleResponse follows the session from a response's top-level error
// code and session id (FetchSessionHandler.handleResponse): a session
// error makes the next fetch a full one (FETCH_SESSION_ID_NOT_FOUND
// without a session id, other errors closing the session by naming it with
// epoch 0); a full fetch answered with a session id starts incremental
// fetches at epoch 1; an incremental answer moves to the next epoch.
func (c *Client) HandleResponse(errCode int16, sessionID int32) {
	switch {
	case errCode == kerr.FetchSessionIDNotFound.Code:
		c.id, c.epoch = 0, 0
	case errCode != 0:
		c.epoch = 0
	case c.epoch == 0:
		c.id = sessionID
		if sessionID != 0 {
			c.epoch = NextEpoch(0)
		}
	default:
		c.epoch = NextEpoch(c.epoch)
	}
}

// HandleError is called when a request got no response (a network error
// or timeout): the next fetch is a full one that closes the session and
// asks for a new one (FetchSessionHandler.handleError).
func (c *Client) HandleError() {
	c.epoch = 0
}

// Reset forgets the session without closing it on the leader (a new
// connection to another broker).
func (c *Client) Reset() {
	c.id, c.epoch, c.session = 0, 0, nil
}

// SessionID is the current session's id (0: none).
func (c *Client) SessionID() int32 { return c.id }
