package security

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/sluice-io/sluice/internal/testproc"
)

// issuer is a test token issuer: an RSA key whose JWKS file the broker
// reads (sasl.oauthbearer.jwks.endpoint.url=file://...).
type issuer struct {
	key  *rsa.PrivateKey
	jwks string
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding
	doc, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "test-key", "use": "sig", "alg": "RS256",
		"n": b64.EncodeToString(k.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(k.E)).Bytes())}}})
	p := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(p, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &issuer{key: k, jwks: p}
}

// token signs an RS256 token for sub with audience aud, valid for ttl
// (negative: expired), with key (the issuer's when nil).
func (is *issuer) token(t *testing.T, sub, aud string, ttl time.Duration, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		key = is.key
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": sub, "aud": aud, "iss": "https://issuer.test",
		"iat": time.Now().Unix(), "exp": time.Now().Add(ttl).Unix()})
	tok.Header["kid"] = "test-key"
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// oauthNode starts a node whose SASL_PLAINTEXT listener serves
// OAUTHBEARER with the issuer's keys (the listener.name.<l>.oauthbearer.
// prefix for the JWKS URL), audience kafka and issuer https://issuer.test.
func oauthNode(t *testing.T, is *issuer, extra map[string]string) (*testproc.Proc, string) {
	t.Helper()
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	props := map[string]string{
		"listeners":               "PLAINTEXT://" + addr(ports[0]) + ",SASL_PLAINTEXT://" + addr(ports[1]),
		"sasl.enabled.mechanisms": "OAUTHBEARER",
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "file://" + is.jwks,
		"sasl.oauthbearer.expected.audience":                                          "kafka",
		"sasl.oauthbearer.expected.issuer":                                            "https://issuer.test",
		"connection.failed.authentication.delay.ms":                                   "50",
	}
	for k, v := range extra {
		props[k] = v
	}
	return startNode(t, ports[0], props), addr(ports[1])
}

// TestSASLOAuthBearer: franz-go with a token signed by the issuer's key
// produces and consumes; an expired token, a wrong audience and a bad
// signature are refused with SASL_AUTHENTICATION_FAILED carrying
// Kafka's RFC 7628 JSON error (after the client's dummy response), and
// counted.
func TestSASLOAuthBearer(t *testing.T) {
	is := newIssuer(t)
	p, saslAddr := oauthNode(t, is, nil)
	good := []kgo.Opt{kgo.SeedBrokers(saslAddr), kgo.SASL(oauth.Auth{Token: is.token(t, "alice", "kafka", time.Hour, nil)}.AsMechanism())}
	produceConsume(t, "oauth-ok", [][]byte{[]byte("one"), []byte("two")}, client(t, good...), good...)

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, token string }{
		{"expired", is.token(t, "alice", "kafka", -time.Hour, nil)},
		{"wrong audience", is.token(t, "alice", "elsewhere", time.Hour, nil)},
		{"bad signature", is.token(t, "alice", "kafka", time.Hour, other)},
	} {
		before := metric(t, p, "sluice_failed_authentication_total")
		bad := client(t, kgo.SeedBrokers(saslAddr), kgo.SASL(oauth.Auth{Token: c.token}.AsMechanism()),
			kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx(t, 20*time.Second), bad)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
			t.Errorf("%s token: %v, want SASL_AUTHENTICATION_FAILED with the invalid_token JSON error", c.name, err)
		}
		if n := metric(t, p, "sluice_failed_authentication_total") - before; n < 1 {
			t.Errorf("%s token: sluice_failed_authentication_total grew by %v", c.name, n)
		}
	}
}

// TestSASLReauthentication (KIP-368): with connections.max.reauth.ms=1500
// franz-go is told the session lifetime and re-authenticates in place;
// it keeps producing across more than three lifetimes, and the broker
// counts the re-authentications.
func TestSASLReauthentication(t *testing.T) {
	is := newIssuer(t)
	p, saslAddr := oauthNode(t, is, map[string]string{"connections.max.reauth.ms": "1500"})
	opts := []kgo.Opt{kgo.SeedBrokers(saslAddr), kgo.SASL(oauth.Auth{Token: is.token(t, "alice", "kafka", time.Hour, nil)}.AsMechanism())}
	cl := client(t, opts...)
	produceConsume(t, "reauth", [][]byte{[]byte("first")}, cl, opts...)

	c := ctx(t, 60*time.Second)
	var values [][]byte
	values = append(values, []byte("first"))
	deadline := time.Now().Add(3*1500*time.Millisecond + time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		v := []byte(fmt.Sprintf("r%d", i))
		pc, cancel := context.WithTimeout(c, 10*time.Second)
		err := cl.ProduceSync(pc, &kgo.Record{Topic: "reauth", Value: v}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce %d at %v: %v", i, time.Until(deadline), err)
		}
		values = append(values, v)
		time.Sleep(100 * time.Millisecond)
	}
	if n := metric(t, p, "sluice_successful_reauthentication_total"); n < 3 {
		t.Errorf("sluice_successful_reauthentication_total = %v after 3 session lifetimes, want >= 3", n)
	}
	t.Logf("%d records, %v re-authentications, %v expired connections closed", len(values),
		metric(t, p, "sluice_successful_reauthentication_total"), metric(t, p, "sluice_expired_connections_killed_total"))
	cc := client(t, append(opts, kgo.ConsumeTopics("reauth"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	got := 0
	for got < len(values) && c.Err() == nil {
		cc.PollFetches(c).EachRecord(func(r *kgo.Record) {
			if string(r.Value) != string(values[got]) {
				t.Fatalf("record %d is %q, want %q", got, r.Value, values[got])
			}
			got++
		})
	}
	if got != len(values) {
		t.Fatalf("consumed %d of %d records", got, len(values))
	}
}
