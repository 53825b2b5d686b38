package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-io/sluice/internal/config"
)

// testJWKS is a key set written for a test: an RSA key (kid "rsa1") and
// a P-256 key (kid "ec1").
type testJWKS struct {
	rsa  *rsa.PrivateKey
	ec   *ecdsa.PrivateKey
	path string
}

func newTestJWKS(t *testing.T) *testJWKS {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := &testJWKS{rsa: rk, ec: ek, path: filepath.Join(t.TempDir(), "jwks.json")}
	k.write(t, k.keys())
	return k
}

func (k *testJWKS) keys() []map[string]string {
	b64 := base64.RawURLEncoding
	ecPub, err := k.ec.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		panic(err)
	}
	return []map[string]string{
		{"kty": "RSA", "kid": "rsa1", "use": "sig", "alg": "RS256",
			"n": b64.EncodeToString(k.rsa.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(k.rsa.E)).Bytes())},
		{"kty": "EC", "kid": "ec1", "crv": "P-256", "x": b64.EncodeToString(ecPub[1:33]), "y": b64.EncodeToString(ecPub[33:])},
	}
}

func (k *testJWKS) write(t *testing.T, keys []map[string]string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"keys": keys})
	if err := os.WriteFile(k.path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// sign signs claims with method, setting the kid header when not empty.
func sign(t *testing.T, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func oauthCfg(props map[string]string) *config.Broker {
	return &config.Broker{Props: props}
}

// TestParseClientResponse: RFC 7628 client messages, with Kafka's
// OAuthBearerClientInitialResponse grammar.
func TestParseClientResponse(t *testing.T) {
	for _, c := range []struct {
		msg, token, authz, err string
		ext                    map[string]string
	}{
		{msg: "n,,\x01auth=Bearer abc.def-_.ghi\x01\x01", token: "abc.def-_.ghi"},
		{msg: "y,,\x01auth=bearer  tok\x01\x01", token: "tok"},
		{msg: "n,a=alice,\x01auth=Bearer tok\x01\x01", token: "tok", authz: "alice"},
		{msg: "n,a=a=2Cb=3Dc,\x01auth=Bearer tok\x01\x01", token: "tok", authz: "a,b=c"},
		{msg: "n,,\x01traceId=123 x\x01auth=Bearer tok\x01\x01", token: "tok", ext: map[string]string{"traceId": "123 x"}},
		{msg: "", err: "GS2"},
		{msg: "\x01", err: "GS2"},
		{msg: "p=tls-unique,,\x01auth=Bearer tok\x01\x01", err: "GS2"},
		{msg: "n,\x01auth=Bearer tok\x01\x01", err: "unterminated"},
		{msg: "n,b=alice,\x01auth=Bearer tok\x01\x01", err: "authorization id"},
		{msg: "n,a=,\x01auth=Bearer tok\x01\x01", err: "authorization id"},
		{msg: "n,a=x=41,\x01auth=Bearer tok\x01\x01", err: "authorization id"},
		{msg: "n,,auth=Bearer tok\x01\x01", err: "%x01"},
		{msg: "n,,\x01auth=Bearer tok\x01", err: "%x01"},
		{msg: "n,,\x01\x01", err: "%x01"},
		{msg: "n,,\x01auth=Basic dXNlcjpwYXNz\x01\x01", err: "Bearer"},
		{msg: "n,,\x01auth=Bearer\x01\x01", err: "Bearer"},
		{msg: "n,,\x01auth=Bearer tok/en\x01\x01", err: "Bearer"},
		{msg: "n,,\x01foo=bar\x01\x01", err: "Bearer"},
		{msg: "n,,\x01auth=Bearer a\x01auth=Bearer b\x01\x01", err: "repeated auth"},
		{msg: "n,,\x01x=1\x01x=2\x01auth=Bearer tok\x01\x01", err: "repeated key"},
		{msg: "n,,\x01k1=v\x01auth=Bearer tok\x01\x01", err: "key/value"},
		{msg: "n,,\x01k=\x01auth=Bearer tok\x01\x01", err: "key/value"},
		{msg: "n,,\x01k=\x00\x01auth=Bearer tok\x01\x01", err: "key/value"},
		{msg: "n,,\x01auth=Bearer tok\x01\x01\x01", err: "key/value"},
	} {
		r, err := ParseClientResponse([]byte(c.msg))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want one mentioning %q", c.msg, err, c.err)
			}
			continue
		}
		if err != nil || r.Token != c.token || r.AuthzID != c.authz || len(r.Extensions) != len(c.ext) {
			t.Errorf("%q: %+v, %v", c.msg, r, err)
		}
		for k, v := range c.ext {
			if r.Extensions[k] != v {
				t.Errorf("%q: extension %s = %q, want %q", c.msg, k, r.Extensions[k], v)
			}
		}
	}
}

// FuzzParseClientResponse: any message parses or fails without panicking;
// a parsed one has a token of Kafka's b64token characters, and the
// message franz-go's client would send for it parses back to it.
func FuzzParseClientResponse(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer abc.def.ghi\x01\x01"))
	f.Add([]byte("n,a=bob,\x01k=v\x01auth=Bearer t\x01\x01"))
	f.Add([]byte("\x01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := ParseClientResponse(msg)
		if err != nil {
			return
		}
		if r.Token == "" || strings.Trim(r.Token, "-_.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
			t.Fatalf("token %q from %q", r.Token, msg)
		}
		again, err := ParseClientResponse([]byte("n,,\x01auth=Bearer " + r.Token + "\x01\x01"))
		if err != nil || again.Token != r.Token {
			t.Fatalf("re-encoded token %q: %+v, %v", r.Token, again, err)
		}
	})
}

// TestOAuthValidator: signatures (RS256, ES256), exp/nbf with the clock
// skew, audience, issuer, the sub claim name, kid resolution and
// rotation, and the configuration errors refused at start.
func TestOAuthValidator(t *testing.T) {
	k := newTestJWKS(t)
	now := time.Now()
	v, err := NewOAuthValidator(oauthCfg(map[string]string{
		"sasl.oauthbearer.jwks.endpoint.url":                                      "file://" + k.path,
		"listener.name.sasl_oauth.oauthbearer.sasl.oauthbearer.expected.audience": "kafka, other",
		"sasl.oauthbearer.expected.issuer":                                        "https://issuer.example",
		"sasl.oauthbearer.clock.skew.seconds":                                     "10",
	}), "SASL_OAUTH")
	if err != nil {
		t.Fatal(err)
	}
	v.reloadIv = 0
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"sub": "alice", "aud": []string{"kafka"}, "iss": "https://issuer.example",
			"exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	}
	with := func(k string, val any) jwt.MapClaims {
		c := good()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, c := range []struct {
		name, token, err string
	}{
		{"RS256", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", good()), ""},
		{"RS512", sign(t, jwt.SigningMethodRS512, k.rsa, "rsa1", good()), ""},
		{"ES256", sign(t, jwt.SigningMethodES256, k.ec, "ec1", good()), ""},
		{"no kid", sign(t, jwt.SigningMethodES256, k.ec, "", good()), ""},
		{"second audience", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("aud", "other")), ""},
		{"expired within skew", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("exp", now.Add(-5*time.Second).Unix())), ""},
		{"expired", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("exp", now.Add(-time.Minute).Unix())), "expired"},
		{"no exp", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("exp", nil)), "exp"},
		{"nbf within skew", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("nbf", now.Add(5*time.Second).Unix())), ""},
		{"not yet valid", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("nbf", now.Add(time.Minute).Unix())), "not valid yet"},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("aud", "elsewhere")), "aud"},
		{"no audience", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("aud", nil)), "aud"},
		{"wrong issuer", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("iss", "https://evil.example")), "iss"},
		{"no sub", sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("sub", nil)), "sub claim"},
		{"bad signature", sign(t, jwt.SigningMethodRS256, otherRSA, "rsa1", good()), "signature"},
		{"unknown kid", sign(t, jwt.SigningMethodRS256, otherRSA, "rsa9", good()), "kid"},
		{"key of another type", sign(t, jwt.SigningMethodRS256, k.rsa, "ec1", good()), "key"},
		{"HS256", sign(t, jwt.SigningMethodHS256, []byte("secret"), "rsa1", good()), "signing method"},
		{"none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", good()), "signing method"},
		{"garbage", "a.b.c", "malformed"},
	} {
		sub, exp, err := v.Validate(c.token)
		if c.err == "" {
			if err != nil || sub != "alice" || exp.Unix() == 0 {
				t.Errorf("%s: %q %v %v", c.name, sub, exp, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err %v, want one mentioning %q", c.name, err, c.err)
		}
	}

	// Rotation: a token naming a kid added to the file since start.
	k.write(t, append(k.keys(), map[string]string{"kty": "RSA", "kid": "rsa2",
		"n": base64.RawURLEncoding.EncodeToString(otherRSA.N.Bytes()), "e": "AQAB"}))
	if _, _, err := v.Validate(sign(t, jwt.SigningMethodRS256, otherRSA, "rsa2", good())); err != nil {
		t.Errorf("a key added to the JWKS: %v", err)
	}

	// sasl.oauthbearer.sub.claim.name.
	v2, err := NewOAuthValidator(oauthCfg(map[string]string{"sasl.oauthbearer.jwks.endpoint.url": "file://" + k.path,
		"sasl.oauthbearer.sub.claim.name": "client_id"}), "SASL_OAUTH")
	if err != nil {
		t.Fatal(err)
	}
	if sub, _, err := v2.Validate(sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", with("client_id", "svc"))); err != nil || sub != "svc" {
		t.Errorf("sub.claim.name=client_id: %q %v", sub, err)
	}

	for _, bad := range []map[string]string{
		{},
		{"sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks.json"},
		{"sasl.oauthbearer.jwks.endpoint.url": k.path},
		{"sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"},
		{"sasl.oauthbearer.jwks.endpoint.url": "file://" + k.path, "sasl.oauthbearer.clock.skew.seconds": "-1"},
	} {
		if _, err := NewOAuthValidator(oauthCfg(bad), "SASL_OAUTH"); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	for _, bad := range []string{`{}`, `{"keys":[]}`, `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, `{"keys":[{"kty":"RSA","n":"!","e":"AQAB"}]}`, `not json`} {
		if _, err := ParseJWKS([]byte(bad)); err == nil {
			t.Errorf("JWKS %s accepted", bad)
		}
	}
}

// TestOAuthServer: the exchange of Kafka's OAuthBearerSaslServer: a good
// token authenticates; a bad one gets the JSON error challenge, then the
// client's %x01 fails with it; an authorization id other than the
// principal and a malformed message fail at once.
func TestOAuthServer(t *testing.T) {
	k := newTestJWKS(t)
	v, err := NewOAuthValidator(oauthCfg(map[string]string{"sasl.oauthbearer.jwks.endpoint.url": "file://" + k.path}), "L")
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	tok := sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", jwt.MapClaims{"sub": "alice", "exp": exp.Unix()})
	s := &oauthServer{v: v}
	if reply, done, err := s.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01")); err != nil || !done || len(reply) != 0 || s.User() != "alice" || !s.CredentialExpiry().Equal(exp) {
		t.Fatalf("good token: %q %v %v, user %q, expiry %v", reply, done, err, s.User(), s.CredentialExpiry())
	}

	expired := sign(t, jwt.SigningMethodRS256, k.rsa, "rsa1", jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()})
	s = &oauthServer{v: v}
	reply, done, err := s.Step([]byte("n,,\x01auth=Bearer " + expired + "\x01\x01"))
	if err != nil || done || string(reply) != `{"status":"invalid_token"}` {
		t.Fatalf("expired token: %q %v %v, want the JSON error challenge", reply, done, err)
	}
	_, done, err = s.Step([]byte{1})
	oe, ok := err.(*OAuthError)
	if done || !ok || oe.Error() != `{"status":"invalid_token"}` || !strings.Contains(oe.LogDetail(), "expired") {
		t.Fatalf("dummy response after the challenge: %v %v", done, err)
	}

	s = &oauthServer{v: v}
	if _, _, err := s.Step([]byte("n,a=bob,\x01auth=Bearer " + tok + "\x01\x01")); err == nil || !strings.Contains(err.Error(), "authorization id") {
		t.Errorf("authorization id bob for alice's token: %v", err)
	}
	for _, msg := range []string{"\x01", "n,,\x01auth=Bearer\x01\x01", "garbage"} {
		s = &oauthServer{v: v}
		if _, _, err := s.Step([]byte(msg)); err == nil || err.Error() != errInvalidResponse.Error() {
			t.Errorf("%q: %v", msg, err)
		}
	}
}

// TestListenerSASLOAuth: OAUTHBEARER in sasl.enabled.mechanisms needs a
// JWKS URL (per listener with the listener.name.<l>.oauthbearer. prefix)
// and is not an inter-broker mechanism.
func TestListenerSASLOAuth(t *testing.T) {
	k := newTestJWKS(t)
	props := map[string]string{"sasl.enabled.mechanisms": "OAUTHBEARER"}
	if _, err := ListenerSASL(oauthCfg(props), "SASL_SSL", nil); err == nil || !strings.Contains(err.Error(), "jwks.endpoint.url") {
		t.Errorf("OAUTHBEARER without a JWKS URL: %v", err)
	}
	props["listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url"] = "file://" + k.path
	sc, err := ListenerSASL(oauthCfg(props), "SASL_SSL", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sc.Server(MechOAuthBearer).(*oauthServer); !ok || sc.Mechanisms[0] != MechOAuthBearer {
		t.Errorf("mechanisms %v", sc.Mechanisms)
	}
	if _, err := ListenerSASL(oauthCfg(props), "OTHER", nil); err == nil {
		t.Error("the per-listener JWKS URL applied to another listener")
	}
	props["sasl.mechanism.inter.broker.protocol"] = "OAUTHBEARER"
	if _, err := InterBrokerSASL(oauthCfg(props), "SASL_SSL"); err == nil {
		t.Error("OAUTHBEARER accepted as the inter-broker mechanism")
	}
}

// TestOAuthValidatorHTTP: an http(s) JWKS URL is read too; an error
// status stops the listener at start.
func TestOAuthValidatorHTTP(t *testing.T) {
	k := newTestJWKS(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks.json" {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, k.path)
	}))
	defer srv.Close()
	v, err := NewOAuthValidator(oauthCfg(map[string]string{"sasl.oauthbearer.jwks.endpoint.url": srv.URL + "/jwks.json"}), "L")
	if err != nil {
		t.Fatal(err)
	}
	if sub, _, err := v.Validate(sign(t, jwt.SigningMethodES256, k.ec, "ec1", jwt.MapClaims{"sub": "bob", "exp": time.Now().Add(time.Minute).Unix()})); err != nil || sub != "bob" {
		t.Errorf("token checked with a JWKS read over HTTP: %q %v", sub, err)
	}
	if _, err := NewOAuthValidator(oauthCfg(map[string]string{"sasl.oauthbearer.jwks.endpoint.url": srv.URL + "/missing"}), "L"); err == nil {
		t.Error("a JWKS URL answering 404 accepted")
	}
}
