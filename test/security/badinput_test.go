package security

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcerts"
	"github.com/sluice-io/sluice/internal/testproc"
)

// idleMs is connections.max.idle.ms of the bad-input node: it closes idle
// unauthenticated connections and bounds TLS handshakes.
const idleMs = 4000

// rawFrame encodes req at version as a request frame (header v1, client
// id "bad"; only non-flexible versions are used here).
func rawFrame(req kmsg.Request, version int16, corr int32) []byte {
	req.SetVersion(version)
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "bad"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// rawConn is a hand-driven connection to a listener.
type rawConn struct {
	t *testing.T
	net.Conn
}

func dialRaw(t *testing.T, addr string, tlsCfg *tls.Config) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if tlsCfg != nil {
		tc := tls.Client(c, tlsCfg)
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			c.Close()
			t.Fatalf("TLS handshake: %v", err)
		}
		c = tc
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t, c}
}

// recv reads one response frame and returns its body after the
// correlation id, or nil if the broker closed the connection. Neither
// within 10 s fails the test (a hang).
func (c *rawConn) recv() []byte {
	c.t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatal("broker neither answered nor closed the connection")
		}
		return nil
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		c.t.Fatalf("response size %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		c.t.Fatalf("truncated response: %v", err)
	}
	return b[4:]
}

// expectClosed: the broker closes the connection within d, whatever it
// writes first.
func (c *rawConn) expectClosed(what string, d time.Duration) {
	c.t.Helper()
	expectClosedWithin(c.t, c.Conn, what, d)
}

func expectClosedWithin(t *testing.T, c net.Conn, what string, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s: connection still open after %v", what, d)
	}
}

func (c *rawConn) handshake(mech string, corr int32) *kmsg.SASLHandshakeResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = mech
	c.Write(rawFrame(req, 1, corr))
	b := c.recv()
	if b == nil {
		return nil
	}
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(1)
	if err := resp.ReadFrom(b); err != nil {
		c.t.Fatalf("SaslHandshake response: %v", err)
	}
	return resp
}

// authenticate sends SaslAuthenticate v1 (not flexible) with msg.
func (c *rawConn) authenticate(msg []byte, corr int32) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = msg
	c.Write(rawFrame(req, 1, corr))
	b := c.recv()
	if b == nil {
		return nil
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.SetVersion(1)
	if err := resp.ReadFrom(b); err != nil {
		c.t.Fatalf("SaslAuthenticate response: %v", err)
	}
	return resp
}

// clientHello captures the first TLS record a Go client sends (a whole
// ClientHello).
func clientHello(t *testing.T) []byte {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		tc := tls.Client(c, &tls.Config{ServerName: "localhost"})
		tc.SetDeadline(time.Now().Add(3 * time.Second))
		tc.Handshake()
	}()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetDeadline(time.Now().Add(5 * time.Second))
	var hdr [5]byte
	if _, err := io.ReadFull(s, hdr[:]); err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(s, rec); err != nil {
		t.Fatal(err)
	}
	return append(hdr[:], rec...)
}

// canary produces a record with an authenticated client and reads it
// back with another, over and over, until stop; it counts rounds and
// keeps the failures.
type canary struct {
	ok   atomic.Int64
	mu   sync.Mutex
	errs []string
	stop chan struct{}
	done chan struct{}
}

func startCanary(t *testing.T, topic string, opts []kgo.Opt) *canary {
	t.Helper()
	pc := client(t, opts...)
	if _, err := kadm.NewClient(pc).CreateTopic(ctx(t, 30*time.Second), 1, -1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	cc := client(t, append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second))...)
	k := &canary{stop: make(chan struct{}), done: make(chan struct{})}
	fail := func(s string) {
		k.mu.Lock()
		k.errs = append(k.errs, time.Now().Format("15:04:05.000 ")+s)
		k.mu.Unlock()
	}
	go func() {
		defer close(k.done)
		for i := 0; ; i++ {
			select {
			case <-k.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			v := strconv.Itoa(i)
			c := ctx(t, 15*time.Second)
			if err := pc.ProduceSync(c, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
				fail("produce " + v + ": " + err.Error())
				continue
			}
			got := false
			for !got && c.Err() == nil {
				fs := cc.PollFetches(c)
				fs.EachError(func(_ string, _ int32, err error) {
					if c.Err() == nil {
						fail("fetch: " + err.Error())
					}
				})
				fs.EachRecord(func(r *kgo.Record) { got = got || string(r.Value) == v })
			}
			if !got {
				fail("record " + v + " not consumed within 15 s")
				continue
			}
			k.ok.Add(1)
		}
	}()
	t.Cleanup(func() {
		select {
		case <-k.stop:
		default:
			close(k.stop)
		}
		<-k.done
	})
	return k
}

// check fails the test if the canary failed, or made no round since the
// last check (over at least a few seconds).
func (k *canary) check(t *testing.T, phase string, last *int64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for k.ok.Load() <= *last && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	n := k.ok.Load()
	if n <= *last {
		t.Errorf("%s: the authenticated client made no produce/consume round", phase)
	}
	k.mu.Lock()
	if len(k.errs) > 0 {
		t.Errorf("%s: the authenticated client failed: %s", phase, strings.Join(k.errs, "; "))
		k.errs = nil
	}
	k.mu.Unlock()
	t.Logf("%s: %d produce/consume rounds so far", phase, n)
	*last = n
}

// nodeHealthy: the process runs, answers on its PLAINTEXT listener, and
// its log has no panic.
func nodeHealthy(t *testing.T, p *testproc.Proc, phase string) {
	t.Helper()
	if !p.Running() {
		t.Fatalf("%s: the node exited: %v", phase, p.ExitErr())
	}
	if err := testproc.Probe(ctx(t, 10*time.Second), p.Addr()); err != nil {
		t.Fatalf("%s: the node does not answer: %v", phase, err)
	}
	b, _ := os.ReadFile(p.LogPath())
	if i := bytes.Index(bytes.ToLower(b), []byte("panic")); i >= 0 {
		t.Fatalf("%s: panic in the node log: %s", phase, b[max(0, i-200):min(len(b), i+500)])
	}
}

// scramProof computes the SCRAM-SHA-512 client-final message for a
// server-first reply, with the given password and iteration count.
func scramFinal(first, serverFirst, password string, iterations int) (string, error) {
	var nonce, salt string
	for _, a := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(a, "r="):
			nonce = a[2:]
		case strings.HasPrefix(a, "s="):
			salt = a[2:]
		}
	}
	s, err := base64.StdEncoding.DecodeString(salt)
	if err != nil {
		return "", err
	}
	salted, err := pbkdf2.Key(sha512.New, password, s, iterations, sha512.Size)
	if err != nil {
		return "", err
	}
	mac := func(k []byte, m string) []byte { h := hmac.New(sha512.New, k); h.Write([]byte(m)); return h.Sum(nil) }
	ck := mac(salted, "Client Key")
	stored := sha512.Sum512(ck)
	without := "c=biws,r=" + nonce
	sig := mac(stored[:], first+","+serverFirst+","+without)
	for i := range ck {
		ck[i] ^= sig[i]
	}
	return without + ",p=" + base64.StdEncoding.EncodeToString(ck), nil
}

// TestBadInputSecurity: malformed TLS handshakes, SASL frames
// and SCRAM exchanges, and a flood of idle connections, against one node
// with a SASL_SSL and a SASL_PLAINTEXT listener (SCRAM-SHA-512 and
// PLAIN). Each attack gets an error, a closed connection or a bounded
// wait, never a panic or a hang; a SCRAM-authenticated franz-go client
// produces and consumes throughout, and the node stays up.
func TestBadInputSecurity(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-test")
	srv := ca.Server("broker1")
	ports, err := testproc.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	const perIPFlood = 1000 // max.connections.per.ip of the flooding address
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`
	p := startNode(t, ports[0], map[string]string{
		"listeners":                                           "PLAINTEXT://" + addr(ports[0]) + ",SASL_SSL://" + addr(ports[1]) + ",SASL_PLAINTEXT://" + addr(ports[2]),
		"ssl.keystore.type":                                   "PEM",
		"ssl.keystore.location":                               srv.File,
		"ssl.truststore.type":                                 "PEM",
		"ssl.truststore.location":                             ca.File,
		"sasl.enabled.mechanisms":                             "SCRAM-SHA-512,PLAIN",
		"listener.name.sasl_ssl.plain.sasl.jaas.config":       jaas,
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
		"sluice.scram.bootstrap.credentials":                  `SCRAM-SHA-512=[name=admin,password="admin-secret"]`,
		"connection.failed.authentication.delay.ms":           "100",
		"connections.max.idle.ms":                             strconv.Itoa(idleMs),
		// The flood comes from 127.0.0.2; the canary and the probes
		// from 127.0.0.1 are not limited.
		"max.connections.per.ip.overrides": "127.0.0.2:" + strconv.Itoa(perIPFlood),
	})
	sslAddr, saslAddr := addr(ports[1]), addr(ports[2])
	tlsCfg := &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}
	admin := []kgo.Opt{kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(tlsCfg), kgo.SASL(scram512("admin", "admin-secret"))}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := authErrTLS(t, sslAddr, tlsCfg)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bootstrap admin over SASL_SSL: %v", err)
		}
	}
	k := startCanary(t, "canary", admin)
	var last int64
	k.check(t, "start", &last)

	t.Run("tls", func(t *testing.T) {
		hello := clientHello(t)
		bound := time.Duration(idleMs)*time.Millisecond + 5*time.Second
		var wg sync.WaitGroup
		// Random bytes, a ClientHello cut in half, a whole one then
		// silence: each closed, at the latest by the handshake bound.
		cases := map[string][]byte{"random bytes": make([]byte, 4096), "half a ClientHello": hello[:len(hello)/2], "a ClientHello then silence": hello, "nothing": nil}
		rand.Read(cases["random bytes"])
		for name, b := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", sslAddr, 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				t0 := time.Now()
				c.Write(b)
				expectClosedWithin(t, c, "SASL_SSL, "+name, bound)
				t.Logf("SASL_SSL, %s: read ended after %v", name, time.Since(t0).Round(time.Millisecond))
			}()
		}
		// TLS to the plaintext listener: the record header reads as a
		// huge request size; closed at once.
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", saslAddr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			tc := tls.Client(c, tlsCfg)
			tc.SetDeadline(time.Now().Add(5 * time.Second))
			if err := tc.Handshake(); err == nil {
				t.Error("a TLS handshake succeeded on the SASL_PLAINTEXT listener")
			}
		}()
		// Plaintext (a SaslHandshake) to the TLS listener.
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", sslAddr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			req := kmsg.NewPtrSASLHandshakeRequest()
			req.Mechanism = "PLAIN"
			c.Write(rawFrame(req, 1, 1))
			expectClosedWithin(t, c, "plaintext to SASL_SSL", 5*time.Second)
		}()
		wg.Wait()
		nodeHealthy(t, p, "tls")
		k.check(t, "tls", &last)
	})

	t.Run("sasl-frames", func(t *testing.T) {
		for _, l := range []struct {
			name string
			addr string
			tls  *tls.Config
		}{{"SASL_PLAINTEXT", saslAddr, nil}, {"SASL_SSL", sslAddr, tlsCfg}} {
			// Sizes over sasl.server.max.receive.size before
			// authentication: closed without reading (or allocating) the
			// body, after a handshake v0 (raw tokens) too.
			for _, size := range []uint32{1<<31 - 1, 600 << 10, 0xffffffff} {
				c := dialRaw(t, l.addr, l.tls)
				c.Write(binary.BigEndian.AppendUint32(nil, size))
				c.expectClosed(fmt.Sprintf("%s, frame of %d bytes", l.name, size), 5*time.Second)

				c = dialRaw(t, l.addr, l.tls)
				req := kmsg.NewPtrSASLHandshakeRequest()
				req.Mechanism = "PLAIN"
				c.Write(rawFrame(req, 0, 1))
				if c.recv() == nil {
					t.Fatalf("%s: SaslHandshake v0 not answered", l.name)
				}
				c.Write(binary.BigEndian.AppendUint32(nil, size))
				c.expectClosed(fmt.Sprintf("%s, raw token of %d bytes", l.name, size), 5*time.Second)
			}
			// SaslAuthenticate before SaslHandshake: ILLEGAL_SASL_STATE,
			// closed.
			c := dialRaw(t, l.addr, l.tls)
			if r := c.authenticate([]byte("n,,n=admin,r=abc"), 1); r == nil || r.ErrorCode != kerr.IllegalSaslState.Code {
				t.Errorf("%s: SaslAuthenticate before SaslHandshake: %+v, want ILLEGAL_SASL_STATE", l.name, r)
			}
			c.expectClosed(l.name+", SaslAuthenticate before SaslHandshake", 5*time.Second)
			// Repeated handshakes: the second is ILLEGAL_SASL_STATE.
			c = dialRaw(t, l.addr, l.tls)
			if r := c.handshake("SCRAM-SHA-512", 1); r == nil || r.ErrorCode != 0 {
				t.Fatalf("%s: SaslHandshake: %+v", l.name, r)
			}
			if r := c.handshake("SCRAM-SHA-512", 2); r == nil || r.ErrorCode != kerr.IllegalSaslState.Code {
				t.Errorf("%s: a second SaslHandshake: %+v, want ILLEGAL_SASL_STATE", l.name, r)
			}
			c.expectClosed(l.name+", repeated SaslHandshake", 5*time.Second)
			// Garbage tokens to each mechanism: SASL_AUTHENTICATION_FAILED.
			for _, mech := range []string{"PLAIN", "SCRAM-SHA-512"} {
				for _, g := range [][]byte{{}, {0xff, 0xfe, 0x00, 0x80}, bytes.Repeat([]byte{0}, 64<<10)} {
					c = dialRaw(t, l.addr, l.tls)
					if r := c.handshake(mech, 1); r == nil || r.ErrorCode != 0 {
						t.Fatalf("%s: SaslHandshake %s: %+v", l.name, mech, r)
					}
					if r := c.authenticate(g, 2); r == nil || r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
						t.Errorf("%s %s: %d garbage bytes: %+v, want SASL_AUTHENTICATION_FAILED", l.name, mech, len(g), r)
					}
					c.expectClosed(l.name+" "+mech+", garbage token", 5*time.Second)
				}
			}
			// A SaslAuthenticate whose bytes field claims 2^31-1 bytes in
			// a small frame: malformed, closed.
			c = dialRaw(t, l.addr, l.tls)
			c.handshake("PLAIN", 1)
			f := rawFrame(kmsg.NewPtrSASLAuthenticateRequest(), 1, 2)
			f = append(f[:len(f)-4], 0x7f, 0xff, 0xff, 0xff, 'x')
			binary.BigEndian.PutUint32(f, uint32(len(f)-4))
			c.Write(f)
			if b := c.recv(); b != nil {
				t.Errorf("%s: a SaslAuthenticate with a bytes length of 2^31-1 was answered", l.name)
			}
			// Any other request before authentication: closed unanswered.
			c = dialRaw(t, l.addr, l.tls)
			c.Write(rawFrame(kmsg.NewPtrMetadataRequest(), 4, 1))
			if b := c.recv(); b != nil {
				t.Errorf("%s: Metadata before authentication was answered", l.name)
			}
		}
		nodeHealthy(t, p, "sasl-frames")
		k.check(t, "sasl-frames", &last)
	})

	t.Run("scram", func(t *testing.T) {
		// start runs SaslHandshake and the client-first message; it
		// returns the connection and the server-first reply.
		start := func(first string) (*rawConn, string) {
			c := dialRaw(t, sslAddr, tlsCfg)
			if r := c.handshake("SCRAM-SHA-512", 1); r == nil || r.ErrorCode != 0 {
				t.Fatalf("SaslHandshake: %+v", r)
			}
			r := c.authenticate([]byte("n,,"+first), 2)
			if r == nil || r.ErrorCode != 0 {
				t.Fatalf("client-first: %+v", r)
			}
			return c, string(r.SASLAuthBytes)
		}
		const first = "n=admin,r=clientnonce"
		final := func(name string, c *rawConn, msg string) {
			t.Helper()
			if r := c.authenticate([]byte(msg), 3); r != nil && r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
				t.Errorf("%s: %+v, want SASL_AUTHENTICATION_FAILED or a closed connection", name, r)
			}
			c.expectClosed(name, 5*time.Second)
		}
		// The right password proves the exchange works by hand.
		c, sf := start(first)
		msg, err := scramFinal(first, sf, "admin-secret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		if r := c.authenticate([]byte(msg), 3); r == nil || r.ErrorCode != 0 || !strings.HasPrefix(string(r.SASLAuthBytes), "v=") {
			t.Fatalf("a correct hand-made SCRAM exchange failed: %+v (server-first %q)", r, sf)
		}
		c.Close()
		// A wrong nonce, a wrong iteration count, a wrong password, a
		// zero proof, a proof that is not base64, a proof of the wrong
		// length, no proof, a wrong channel binding.
		c, sf = start(first)
		msg, _ = scramFinal(first, sf, "admin-secret", 4096)
		final("wrong nonce", c, strings.Replace(msg, "r=clientnonce", "r=otherXnonce", 1))
		c, sf = start(first)
		msg, _ = scramFinal(first, sf, "admin-secret", 4097)
		final("wrong iteration count", c, msg)
		c, sf = start(first)
		msg, _ = scramFinal(first, sf, "wrong", 4096)
		final("wrong password", c, msg)
		for name, proof := range map[string]string{"zero proof": base64.StdEncoding.EncodeToString(make([]byte, 64)), "proof not base64": "!!!not*base64===", "short proof": "AAAA", "huge proof": strings.Repeat("A", 7000)} {
			c, sf = start(first)
			msg, _ = scramFinal(first, sf, "admin-secret", 4096)
			final(name, c, msg[:strings.LastIndex(msg, ",p=")+3]+proof)
		}
		c, sf = start(first)
		msg, _ = scramFinal(first, sf, "admin-secret", 4096)
		final("no proof", c, msg[:strings.LastIndex(msg, ",p=")])
		c, sf = start(first)
		msg, _ = scramFinal(first, sf, "admin-secret", 4096)
		final("wrong channel binding", c, strings.Replace(msg, "c=biws", "c=eSws", 1))
		// Client-first messages: absurd lengths, invalid UTF-8, bad
		// names and headers.
		for name, cf := range map[string][]byte{
			"64 KiB nonce":        []byte("n,,n=admin,r=" + strings.Repeat("a", 64<<10)),
			"9 KiB user":          []byte("n,,n=" + strings.Repeat("u", 9<<10) + ",r=abc"),
			"invalid UTF-8":       {'n', ',', ',', 'n', '=', 0xff, 0xfe, ',', 'r', '=', 'a', 'b', 'c'},
			"bad saslname":        []byte("n,,n=ad=min,r=abc"),
			"channel binding":     []byte("p=tls-unique,,n=admin,r=abc"),
			"other authzid":       []byte("n,a=root,n=admin,r=abc"),
			"empty nonce":         []byte("n,,n=admin,r="),
			"unknown user":        []byte("n,,n=nobody,r=abc"),
			"commas only":         []byte(",,,,,,,,"),
			"NULs":                make([]byte, 100),
			"base64 of a message": []byte(base64.StdEncoding.EncodeToString([]byte("n,,n=admin,r=abc"))),
		} {
			c := dialRaw(t, sslAddr, tlsCfg)
			c.handshake("SCRAM-SHA-512", 1)
			final("client-first "+name, c, string(cf))
		}
		// A third message after success, and more than ten exchanges'
		// worth of steps, are refused by the state machine: covered by
		// FuzzSASLRequest. A correct login still works.
		if err := authErrTLS(t, sslAddr, tlsCfg); err != nil {
			t.Errorf("a correct SCRAM login after the bad ones: %v", err)
		}
		nodeHealthy(t, p, "scram")
		k.check(t, "scram", &last)
	})

	t.Run("flood", func(t *testing.T) {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatal(err)
		}
		// Each connection costs this process one descriptor and the node
		// one; keep 1,000 spare.
		n := min(3000, int(rl.Cur)-1000)
		if n < perIPFlood+100 {
			t.Skipf("open-file limit %d too low for the flood", rl.Cur)
		}
		rejected0 := metric(t, p, "sluice_connections_rejected_total")
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
		conns := make([]net.Conn, 0, n)
		t.Cleanup(func() {
			for _, c := range conns {
				c.Close()
			}
		})
		t0 := time.Now()
		for i := 0; i < n; i++ {
			a := saslAddr
			if i%3 == 0 {
				a = sslAddr // left in the TLS handshake
			}
			c, err := d.Dial("tcp", a)
			if err != nil {
				t.Fatalf("dial %d: %v", i, err)
			}
			conns = append(conns, c)
		}
		t.Logf("%d idle connections from 127.0.0.2 opened in %v (%d to SASL_SSL)", n, time.Since(t0).Round(time.Millisecond), (n+2)/3)
		// The excess over max.connections.per.ip is refused at accept.
		var rejected float64
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if rejected = metric(t, p, "sluice_connections_rejected_total") - rejected0; rejected >= float64(n-perIPFlood) {
				break
			}
		}
		if rejected != float64(n-perIPFlood) {
			t.Errorf("%v connections refused, want %d over max.connections.per.ip %d", rejected, n-perIPFlood, perIPFlood)
		}
		if open := metric(t, p, "sluice_connections"); open > perIPFlood+50 {
			t.Errorf("%v connections open on the node, want at most %d and the canary's", open, perIPFlood)
		}
		k.check(t, "flood (held)", &last)
		// connections.max.idle.ms closes every one of them, SASL and
		// TLS alike, though none ever sent a byte.
		var wg sync.WaitGroup
		var still atomic.Int64
		for _, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.SetReadDeadline(t0.Add(time.Duration(idleMs)*time.Millisecond + 10*time.Second))
				_, err := io.Copy(io.Discard, c)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					still.Add(1)
				}
			}()
		}
		wg.Wait()
		if s := still.Load(); s > 0 {
			t.Errorf("%d idle unauthenticated connections still open %v after connections.max.idle.ms", s, time.Since(t0).Round(time.Second))
		}
		if open := metric(t, p, "sluice_connections"); open > 20 {
			t.Errorf("%v connections open on the node after the flood was closed by the idle timeout", open)
		}
		nodeHealthy(t, p, "flood")
		k.check(t, "flood (after)", &last)
	})

	k.check(t, "end", &last)
	close(k.stop)
	<-k.done
	nodeHealthy(t, p, "end")
}

// authErrTLS is the error of one Metadata request through SCRAM-SHA-512
// (admin) over TLS at addr, with a fresh client.
func authErrTLS(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	cl := client(t, kgo.SeedBrokers(addr), kgo.DialTLSConfig(cfg), kgo.SASL(scram512("admin", "admin-secret")), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	defer cl.Close()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx(t, 10*time.Second), cl)
	return err
}
