package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeSASL accepts "good" (user bob) in one step, "two" then "good" in two;
// anything else fails.
type fakeSASL struct{ user string }

func (f *fakeSASL) Step(msg []byte) ([]byte, bool, error) {
	switch string(msg) {
	case "good":
		f.user = "bob"
		return []byte("welcome"), true, nil
	case "two":
		return []byte("again"), false, nil
	}
	return nil, false, errors.New("Authentication failed: nope")
}

func (f *fakeSASL) User() string { return f.user }

func saslListener() Listener {
	return Listener{Name: "SASL_PLAINTEXT", SASL: &SASL{Mechanisms: []string{"PLAIN", "SCRAM-SHA-256"}, FailureDelay: 200 * time.Millisecond,
		Server: func(string) SASLServer { return &fakeSASL{} }}}
}

func handshake(mech string, v int16) *kmsg.SASLHandshakeRequest {
	r := kmsg.NewPtrSASLHandshakeRequest()
	r.SetVersion(v)
	r.Mechanism = mech
	return r
}

func authenticate(msg string) *kmsg.SASLAuthenticateRequest {
	r := kmsg.NewPtrSASLAuthenticateRequest()
	r.SetVersion(2)
	r.SASLAuthBytes = []byte(msg)
	return r
}

// TestSASLExchange covers the SaslHandshake v1 / SaslAuthenticate flow:
// a two-step success sets the principal and opens the other APIs; a
// second handshake is ILLEGAL_SASL_STATE; an unknown mechanism gets the
// enabled list and a closed connection; a failure gets
// SASL_AUTHENTICATION_FAILED after the delay and a closed connection.
func TestSASLExchange(t *testing.T) {
	_, addr, seen := startListener(t, Config{}, saslListener())
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

	cl := NewClient(addr, "t")
	defer cl.Close()
	if r := do(cl, handshake("PLAIN", 1)).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := do(cl, authenticate("two")).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 || string(r.SASLAuthBytes) != "again" {
		t.Fatalf("first step: %+v", r)
	}
	if r := do(cl, authenticate("good")).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 || string(r.SASLAuthBytes) != "welcome" || r.SessionLifetimeMillis != 0 {
		t.Fatalf("last step: %+v", r)
	}
	do(cl, metadataReq())
	if got := <-seen; got.principal != "User:bob" {
		t.Errorf("principal %q, want User:bob", got.principal)
	}
	if r := do(cl, handshake("PLAIN", 1)).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("handshake after authentication: code %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
	}

	un := NewClient(addr, "t")
	defer un.Close()
	r := do(un, handshake("GSSAPI", 1)).(*kmsg.SASLHandshakeResponse)
	if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || len(r.SupportedMechanisms) != 2 || r.SupportedMechanisms[1] != "SCRAM-SHA-256" {
		t.Errorf("unknown mechanism: %+v", r)
	}
	if _, err := un.Request(ctx, metadataReq()); err == nil {
		t.Error("connection still open after an unsupported mechanism")
	}

	bad := NewClient(addr, "t")
	defer bad.Close()
	do(bad, handshake("PLAIN", 1))
	t0 := time.Now()
	ar := do(bad, authenticate("bad")).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != kerr.SaslAuthenticationFailed.Code || ar.ErrorMessage == nil || *ar.ErrorMessage != "Authentication failed: nope" {
		t.Errorf("failed authentication: %+v", ar)
	}
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Errorf("failure answered after %v, before the delay", d)
	}
	if _, err := bad.Request(ctx, metadataReq()); err == nil {
		t.Error("connection still open after a failed authentication")
	}

	early := NewClient(addr, "t")
	defer early.Close()
	if r := do(early, authenticate("good")).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslAuthenticate before SaslHandshake: code %d, want ILLEGAL_SASL_STATE", r.ErrorCode)
	}
	if _, err := early.Request(ctx, metadataReq()); err == nil {
		t.Error("connection still open after SaslAuthenticate before SaslHandshake")
	}

	// Without SASL on the listener, the SASL APIs are ILLEGAL_SASL_STATE.
	_, paddr, _ := startListener(t, Config{}, Listener{Name: "PLAINTEXT"})
	pc := NewClient(paddr, "t")
	defer pc.Close()
	if r := do(pc, handshake("PLAIN", 1)).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("handshake on a PLAINTEXT listener: code %d", r.ErrorCode)
	}
}

// TestSASLHandshakeV0RawTokens: after SaslHandshake v0 the token is a raw
// size-prefixed frame, answered by one (KIP-43), then requests flow.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	_, addr, seen := startListener(t, Config{}, saslListener())
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	readFrame := func() []byte {
		t.Helper()
		var n [4]byte
		if _, err := io.ReadFull(nc, n[:]); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(nc, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	nc.Write(frame(handshake("PLAIN", 0), 0, 1))
	resp := kmsg.NewPtrSASLHandshakeResponse()
	if err := resp.ReadFrom(readFrame()[4:]); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("handshake v0: %v %+v", err, resp)
	}
	nc.Write(binary.BigEndian.AppendUint32(nil, 4))
	nc.Write([]byte("good"))
	if got := string(readFrame()); got != "welcome" {
		t.Fatalf("raw reply %q", got)
	}
	nc.Write(frame(metadataReq(), 9, 2))
	readFrame()
	if got := <-seen; got.principal != "User:bob" {
		t.Errorf("principal %q", got.principal)
	}
}

// FuzzSASLRequest drives the SASL state machine of an unauthenticated
// connection with up to three arbitrary frames in a row (as readLoop
// dispatches them: raw tokens after SaslHandshake v0, requests
// otherwise): every frame is answered, fails the exchange or closes the
// connection, never panics, and no request but ApiVersions and the SASL
// ones reaches a handler before authentication completes.
func FuzzSASLRequest(f *testing.F) {
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 0, MaxVersion: 12, Serve: func(r *Request) Reply {
		if r.Conn.saslPending() {
			panic("Metadata served before authentication")
		}
		return Reply{Resp: r.Body.ResponseKind()}
	}})
	srv := NewServer(Config{}, reg)
	l := saslListener()
	l.SASL.FailureDelay = 0
	body := func(b []byte) []byte { return b[4:] }
	f.Add(body(frame(handshake("PLAIN", 1), 1, 1)), body(frame(authenticate("good"), 2, 2)), body(frame(metadataReq(), 9, 3)))
	f.Add(body(frame(handshake("PLAIN", 0), 0, 1)), []byte("two"), []byte("good"))
	f.Add(body(frame(authenticate("good"), 2, 1)), body(frame(handshake("PLAIN", 1), 1, 2)), []byte{})
	f.Add(body(frame(handshake("PLAIN", 1), 1, 1)), body(frame(handshake("PLAIN", 1), 1, 2)), body(frame(authenticate("x"), 2, 3)))
	f.Add(body(frame(kmsg.NewPtrApiVersionsRequest(), 3, 1)), body(frame(metadataReq(), 9, 2)), []byte{})
	f.Fuzz(func(t *testing.T, f1, f2, f3 []byte) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		c := &Conn{srv: srv, nc: a, l: &l, Values: map[string]any{}}
		for _, fr := range [][]byte{f1, f2, f3} {
			var p pending
			if c.saslPending() && c.sasl.raw {
				p = c.rawToken(fr)
			} else {
				if len(fr) < 8 {
					return
				}
				var err error
				if p, err = c.handle(fr, false); err != nil {
					return
				}
			}
			resp := p.reply.Resp
			if p.reply.Await != nil {
				resp = p.reply.Await()
			}
			if resp != nil {
				resp.SetVersion(p.version)
				resp.AppendTo(nil)
			}
			if p.reply.Close {
				return
			}
		}
	})
}
