package protocol

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/metrics"
)

// expiringSASL authenticates the user named by the message in one step;
// "short:<user>" gives a credential expiring in 100 ms.
type expiringSASL struct {
	user string
	exp  time.Time
}

func (e *expiringSASL) Step(msg []byte) ([]byte, bool, error) {
	s := string(msg)
	if u, ok := strings.CutPrefix(s, "short:"); ok {
		e.exp, s = time.Now().Add(100*time.Millisecond), u
	}
	if s == "" || s == "bad" {
		return nil, false, errors.New("Authentication failed: nope")
	}
	e.user = s
	return nil, true, nil
}

func (e *expiringSASL) User() string                { return e.user }
func (e *expiringSASL) CredentialExpiry() time.Time { return e.exp }

// TestSASLReauthentication (KIP-368): with connections.max.reauth.ms the
// session lifetime is announced, the same principal re-authenticates in
// place (counted), a request after expiry or during re-authentication
// closes the connection, a changed principal or mechanism is refused, and
// a credential's expiry shortens the session.
func TestSASLReauthentication(t *testing.T) {
	l := Listener{Name: "SASL_REAUTH", SASL: &SASL{Mechanisms: []string{"PLAIN", "SCRAM-SHA-256"}, FailureDelay: 10 * time.Millisecond,
		MaxReauth: map[string]time.Duration{"PLAIN": 400 * time.Millisecond},
		Server:    func(string) SASLServer { return &expiringSASL{} }}}
	_, addr, seen := startListener(t, Config{}, l)
	go func() {
		for range seen {
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	do := func(cl *Client, req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	login := func(cl *Client, mech, msg string) *kmsg.SASLAuthenticateResponse {
		t.Helper()
		if r := do(cl, handshake(mech, 1)).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("handshake %s: %v", mech, kerr.ErrorForCode(r.ErrorCode))
		}
		return do(cl, authenticate(msg)).(*kmsg.SASLAuthenticateResponse)
	}
	closed := func(cl *Client, what string) {
		t.Helper()
		if _, err := cl.Request(ctx, metadataReq()); err == nil {
			t.Errorf("%s: the connection is still open", what)
		}
	}
	reauths := func() float64 { return testutil.ToFloat64(metrics.Reauthentications.WithLabelValues("SASL_REAUTH")) }

	cl := NewClient(addr, "t")
	defer cl.Close()
	if r := login(cl, "PLAIN", "bob"); r.ErrorCode != 0 || r.SessionLifetimeMillis != 400 {
		t.Fatalf("authentication: code %d, SessionLifetimeMillis %d, want 400", r.ErrorCode, r.SessionLifetimeMillis)
	}
	do(cl, metadataReq())
	before := reauths()
	for range 3 {
		time.Sleep(250 * time.Millisecond)
		if r := login(cl, "PLAIN", "bob"); r.ErrorCode != 0 || r.SessionLifetimeMillis != 400 {
			t.Fatalf("re-authentication: %+v", r)
		}
		do(cl, metadataReq()) // still within the renewed session
	}
	if n := reauths() - before; n != 3 {
		t.Errorf("sluice_successful_reauthentication_total grew by %v, want 3", n)
	}
	time.Sleep(500 * time.Millisecond)
	closed(cl, "a request after the session expired")

	// A different principal is refused and the connection closed.
	other := NewClient(addr, "t")
	defer other.Close()
	failedBefore := testutil.ToFloat64(metrics.FailedReauthentications.WithLabelValues("SASL_REAUTH"))
	login(other, "PLAIN", "bob")
	r := login(other, "PLAIN", "alice")
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "Cannot change principals") {
		t.Errorf("re-authentication as another principal: %+v", r)
	}
	if n := testutil.ToFloat64(metrics.FailedReauthentications.WithLabelValues("SASL_REAUTH")) - failedBefore; n != 1 {
		t.Errorf("sluice_failed_reauthentication_total = %v, want 1", n)
	}
	closed(other, "after a refused re-authentication")

	// The mechanism may not change; SaslHandshake v0 may not re-authenticate.
	for _, h := range []*kmsg.SASLHandshakeRequest{handshake("SCRAM-SHA-256", 1), handshake("PLAIN", 0)} {
		mc := NewClient(addr, "t")
		login(mc, "PLAIN", "bob")
		if r := do(mc, h).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
			t.Errorf("re-authentication handshake %s v%d: code %d, want ILLEGAL_SASL_STATE", h.Mechanism, h.Version, r.ErrorCode)
		}
		mc.Close()
	}

	// Another request in the middle of a re-authentication closes it.
	mid := NewClient(addr, "t")
	defer mid.Close()
	login(mid, "PLAIN", "bob")
	do(mid, handshake("PLAIN", 1))
	closed(mid, "Metadata during re-authentication")

	// The credential's expiry bounds the session.
	short := NewClient(addr, "t")
	defer short.Close()
	if r := login(short, "PLAIN", "short:bob"); r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > 100 {
		t.Errorf("SessionLifetimeMillis %d with a credential expiring in 100 ms", r.SessionLifetimeMillis)
	}

	// A mechanism without connections.max.reauth.ms never expires and
	// cannot re-authenticate.
	scram := NewClient(addr, "t")
	defer scram.Close()
	if r := login(scram, "SCRAM-SHA-256", "short:bob"); r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
		t.Errorf("SCRAM without connections.max.reauth.ms: %+v", r)
	}
	if r := do(scram, handshake("SCRAM-SHA-256", 1)).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("handshake on a session that does not expire: code %d", r.ErrorCode)
	}
}
