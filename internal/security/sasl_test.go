package security

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/config"
)

// TestParseJAAS: Kafka's forms parse; malformed ones are errors that do
// not quote the (secret-holding) text.
func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="a \"quoted\" s;e=cret" user_admin="a \"quoted\" s;e=cret" user_alice=bare;`)
	if err != nil {
		t.Fatal(err)
	}
	if j.Module != PlainLoginModule || j.Flag != "required" || j.Options["password"] != `a "quoted" s;e=cret` || j.Options["user_alice"] != "bare" || len(j.Options) != 4 {
		t.Fatalf("parsed %+v", j)
	}
	for _, bad := range []string{
		``, `;`, `Module`, `Module required`, `Module sometimes;`, `Module required user;`, `Module required user=;`,
		`Module required user="unterminated;`, `Module required user="x\`, `Module required a=b; Other required;`,
		`Module required a=b`, `Module required =b;`, `Module required a=b c;`, `"quoted" required;`,
	} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("ParseJAAS(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("error quotes the text: %v", err)
		}
	}
}

// FuzzParseJAAS: any input parses or fails, never panics, and a parsed
// configuration has a module and a valid flag.
func FuzzParseJAAS(f *testing.F) {
	f.Add(`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s" user_admin="s";`)
	f.Add(`M optional a="\n\t\\";`)
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJAAS(s)
		if err == nil && (j.Module == "" || j.Flag == "") {
			t.Fatalf("parsed without module or flag: %+v", j)
		}
	})
}

// TestPlainServer: RFC 4616 messages, Kafka's checks.
func TestPlainServer(t *testing.T) {
	for _, c := range []struct {
		msg, user, err string
	}{
		{"\x00alice\x00pw", "alice", ""},
		{"alice\x00alice\x00pw", "alice", ""},
		{"bob\x00alice\x00pw", "", "authorization id"},
		{"\x00alice\x00wrong", "", "Invalid username or password"},
		{"\x00nobody\x00pw", "", "Invalid username or password"},
		{"\x00\x00pw", "", "username not specified"},
		{"\x00alice\x00", "", "password not specified"},
		{"alice", "", "expected 3 tokens"},
		{"\x00a\x00b\x00c", "", "expected 3 tokens"},
		{"", "", "expected 3 tokens"},
	} {
		s := &plainServer{users: map[string]string{"alice": "pw"}}
		_, done, err := s.Step([]byte(c.msg))
		if c.err == "" {
			if err != nil || !done || s.User() != c.user {
				t.Errorf("%q: done %v user %q err %v", c.msg, done, s.User(), err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: err %v, want %q", c.msg, err, c.err)
		}
	}
}

// TestScramServer: franz-go's SCRAM client authenticates against a stored
// credential for each mechanism; a wrong password, an unknown user and
// malformed messages fail with Kafka's one message and never panic.
func TestScramServer(t *testing.T) {
	for _, mech := range []string{MechScramSHA256, MechScramSHA512} {
		cred, err := NewScramCredential(mech, "alice-secret", 4096)
		if err != nil {
			t.Fatal(err)
		}
		lookup := func(m, u string) (ScramCredential, bool) { return cred, m == mech && u == "alice" }
		run := func(user, pass string) (string, error) {
			a := scram.Auth{User: user, Pass: pass}
			m := a.AsSha256Mechanism()
			if mech == MechScramSHA512 {
				m = a.AsSha512Mechanism()
			}
			sess, msg, err := m.Authenticate(context.Background(), "h")
			if err != nil {
				return "", err
			}
			srv := newScramServer(mech, lookup)
			for i := 0; i < 4; i++ {
				reply, done, err := srv.Step(msg)
				if err != nil {
					return "", err
				}
				cdone, next, err := sess.Challenge(reply)
				if err != nil {
					return "", err
				}
				if done {
					if !cdone {
						t.Fatal("server done before the client")
					}
					return srv.User(), nil
				}
				msg = next
			}
			t.Fatal("exchange did not end")
			return "", nil
		}
		if u, err := run("alice", "alice-secret"); err != nil || u != "alice" {
			t.Errorf("%s: user %q err %v", mech, u, err)
		}
		for _, c := range [][2]string{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
			if _, err := run(c[0], c[1]); err == nil || !strings.Contains(err.Error(), "invalid credentials with SASL mechanism "+mech) {
				t.Errorf("%s %v: err %v", mech, c, err)
			}
		}
		for _, msg := range []string{"", "n,,", "n,,n=alice", "x,,n=alice,r=abc", "n,,n=alice,r=", "n,a=bob,n=alice,r=abc", strings.Repeat("n", 10000), "\xff\xfe", "n,,n=al=ce,r=a"} {
			srv := newScramServer(mech, lookup)
			if _, _, err := srv.Step([]byte(msg)); err == nil {
				// A valid first message: the final one must be refused.
				if _, _, err := srv.Step([]byte("c=biws,r=x,p=AAAA")); err == nil {
					t.Errorf("%s: %q then a bogus proof accepted", mech, msg)
				}
			}
		}
	}
}

// FuzzScramServer: arbitrary client messages never panic the server.
func FuzzScramServer(f *testing.F) {
	cred, _ := NewScramCredential(MechScramSHA256, "pw", 4096)
	f.Add("n,,n=alice,r=abc", "c=biws,r=abc,p=AAAA")
	f.Fuzz(func(t *testing.T, first, final string) {
		srv := newScramServer(MechScramSHA256, func(string, string) (ScramCredential, bool) { return cred, true })
		if _, done, err := srv.Step([]byte(first)); err == nil && !done {
			if _, done, err := srv.Step([]byte(final)); err == nil && done {
				t.Fatalf("accepted %q %q", first, final)
			}
		}
	})
}

// TestScramLibrdkafkaNonce: librdkafka's client-final repeats its own
// nonce in front of the combined one; Kafka (endsWith) and sluice accept
// it when the proof, computed over that message, is right.
func TestScramLibrdkafkaNonce(t *testing.T) {
	cred, _ := NewScramCredential(MechScramSHA256, "pw", 4096)
	srv := newScramServer(MechScramSHA256, func(string, string) (ScramCredential, bool) { return cred, true })
	first := "n=alice,r=cnonce"
	sf, done, err := srv.Step([]byte("n,," + first))
	if err != nil || done {
		t.Fatal(err)
	}
	attrs := strings.Split(string(sf), ",")
	nonce := strings.TrimPrefix(attrs[0], "r=")
	final := func(r, pass string) string {
		salted, _ := pbkdf2.Key(sha256.New, pass, cred.Salt, 4096, 32)
		clientKey := hmacOf(sha256.New, salted, []byte("Client Key"))
		stored := sha256.Sum256(clientKey)
		without := "c=biws,r=" + r
		sig := hmacOf(sha256.New, stored[:], []byte(first+","+string(sf)+","+without))
		for i := range clientKey {
			clientKey[i] ^= sig[i]
		}
		return without + ",p=" + base64.StdEncoding.EncodeToString(clientKey)
	}
	if v, done, err := srv.Step([]byte(final("cnonce"+nonce, "pw"))); err != nil || !done || !strings.HasPrefix(string(v), "v=") || srv.User() != "alice" {
		t.Fatalf("doubled nonce: %q %v %v", v, done, err)
	}
	for _, c := range [][2]string{{"other" + nonce[3:], "pw"}, {"cnonce" + nonce, "wrong"}} {
		srv := newScramServer(MechScramSHA256, func(string, string) (ScramCredential, bool) { return cred, true })
		srv.Step([]byte("n,," + first))
		// The server nonce differs per exchange: a stale one must fail.
		if _, _, err := srv.Step([]byte(final(c[0], c[1]))); err == nil {
			t.Errorf("%v accepted", c)
		}
	}
}

// TestListenerSASLReauth: connections.max.reauth.ms per listener and per
// mechanism (KIP-368), 0 meaning sessions that do not expire, and bad
// values refused.
func TestListenerSASLReauth(t *testing.T) {
	cfg := &config.Broker{Props: map[string]string{
		"sasl.enabled.mechanisms":   "SCRAM-SHA-256,SCRAM-SHA-512",
		"connections.max.reauth.ms": "1500",
		"listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "0",
	}}
	sc, err := ListenerSASL(cfg, "SASL_PLAINTEXT", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sc.MaxReauth["SCRAM-SHA-256"] != 1500*time.Millisecond || sc.MaxReauth["SCRAM-SHA-512"] != 0 {
		t.Errorf("MaxReauth %v", sc.MaxReauth)
	}
	cfg.Props["connections.max.reauth.ms"] = "-1"
	if _, err := ListenerSASL(cfg, "SASL_PLAINTEXT", nil); err == nil {
		t.Error("connections.max.reauth.ms=-1 accepted")
	}
}
