package security

// SASL/OAUTHBEARER, server side (KIP-255, RFC 7628), validating JSON Web
// Tokens against a JSON Web Key Set as Kafka's OAuthBearerValidatorCallbackHandler
// does (KIP-768): the keys come from sasl.oauthbearer.jwks.endpoint.url,
// the signature (RS256/384/512, ES256/384/512) is checked with
// github.com/golang-jwt/jwt/v5, exp is required and exp/nbf are checked
// with sasl.oauthbearer.clock.skew.seconds of leeway,
// sasl.oauthbearer.expected.audience and sasl.oauthbearer.expected.issuer
// when set, and the principal is User:<the sasl.oauthbearer.sub.claim.name
// claim>. A failure is answered as Kafka's OAuthBearerSaslServer answers
// it (RFC 7628 §3.2.2): a JSON error challenge, then, on the client's
// dummy %x01 response, SASL_AUTHENTICATION_FAILED.

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/sluice-io/sluice/internal/config"
)

// MechOAuthBearer is the OAUTHBEARER mechanism name.
const MechOAuthBearer = "OAUTHBEARER"

// maxJWKSBytes bounds a JWKS document.
const maxJWKSBytes = 1 << 20

// OAuthSetting returns an OAUTHBEARER setting for a listener, as Kafka
// reads a mechanism's settings: listener.name.<l>.oauthbearer.<name>,
// else listener.name.<l>.<name>, else <name>, else its default.
func OAuthSetting(cfg *config.Broker, listener, name string) string {
	if v, ok := cfg.Props["listener.name."+strings.ToLower(listener)+".oauthbearer."+name]; ok {
		return strings.TrimSpace(v)
	}
	return cfg.Setting(listener, name)
}

// ClientResponse is the client's first OAUTHBEARER message (RFC 7628
// §3.1): the GS2 header's authorization id, the bearer token of the auth
// key, and the other key/value pairs (SASL extensions, KIP-342).
type ClientResponse struct {
	AuthzID    string
	Token      string
	Extensions map[string]string
}

// Patterns of Kafka's OAuthBearerClientInitialResponse.
var (
	oauthKeyRE   = regexp.MustCompile(`^[A-Za-z]+$`)
	oauthValueRE = regexp.MustCompile(`^[\x21-\x7E \t\r\n]+$`)
	oauthAuthRE  = regexp.MustCompile(`^([\w]+)[ ]+([-_.a-zA-Z0-9]+)$`)
)

// errInvalidResponse is the error of a malformed client message; Kafka's
// authenticator answers any SaslException so.
var errInvalidResponse = errors.New("Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER")

// ParseClientResponse parses the client's first message:
// gs2-header %x01 *(key "=" value %x01) %x01, where the gs2 header is
// "n," or "y," followed by an optional "a=<authzid>" and ",", and the
// auth value is "Bearer <token>" (the scheme compared case-insensitively).
// Channel binding ("p=") is refused, as are a missing auth key, a
// repeated key and characters outside RFC 7628's grammar.
func ParseClientResponse(msg []byte) (ClientResponse, error) {
	s := string(msg)
	var r ClientResponse
	bad := func(what string) (ClientResponse, error) {
		return ClientResponse{}, fmt.Errorf("invalid OAUTHBEARER client response: %s", what)
	}
	flag, rest, ok := strings.Cut(s, ",")
	if !ok || (flag != "n" && flag != "y") {
		return bad("the GS2 header must start with n, or y, (no channel binding)")
	}
	authz, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return bad("unterminated GS2 header")
	}
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok || a == "" {
			return bad("malformed authorization id")
		}
		// saslname: "=2C" is ',' and "=3D" is '='; no other '=' escapes.
		un := strings.NewReplacer("=2C", ",", "=3D", "=").Replace(a)
		if strings.Count(a, "=") != strings.Count(a, "=2C")+strings.Count(a, "=3D") {
			return bad("malformed authorization id")
		}
		r.AuthzID = un
	}
	if !strings.HasPrefix(rest, "\x01") || !strings.HasSuffix(rest, "\x01\x01") || len(rest) < 3 {
		return bad("key/value pairs must be separated and terminated by %x01")
	}
	pairs := strings.Split(rest[1:len(rest)-2], "\x01")
	auth := ""
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || !oauthKeyRE.MatchString(k) || !oauthValueRE.MatchString(v) {
			return bad("malformed key/value pair")
		}
		if k == "auth" {
			if auth != "" {
				return bad("repeated auth key")
			}
			auth = v
			continue
		}
		if r.Extensions == nil {
			r.Extensions = map[string]string{}
		}
		if _, dup := r.Extensions[k]; dup {
			return bad("repeated key")
		}
		r.Extensions[k] = v
	}
	m := oauthAuthRE.FindStringSubmatch(auth)
	if m == nil || !strings.EqualFold(m[1], "bearer") {
		return bad(`no auth="Bearer <token>" pair`)
	}
	r.Token = m[2]
	return r, nil
}

// OAuthValidator validates access tokens for one listener (Kafka's
// ValidatorAccessTokenValidator with a JWKS verification key resolver).
type OAuthValidator struct {
	jwksURL  *url.URL
	skew     time.Duration
	audience []string
	issuer   string
	subClaim string
	now      func() time.Time

	mu       sync.Mutex
	keys     map[string]crypto.PublicKey // by kid; unnamed keys under ""+index
	loaded   time.Time
	reloadIv time.Duration
}

// NewOAuthValidator reads the OAUTHBEARER settings of a listener
// (sasl.oauthbearer.jwks.endpoint.url, .clock.skew.seconds,
// .expected.audience, .expected.issuer, .sub.claim.name, each possibly
// prefixed by listener.name.<l>.oauthbearer.) and loads the key set. The
// URL must be file://, http:// or https://.
func NewOAuthValidator(cfg *config.Broker, listener string) (*OAuthValidator, error) {
	get := func(n string) string { return OAuthSetting(cfg, listener, n) }
	raw := get("sasl.oauthbearer.jwks.endpoint.url")
	if raw == "" {
		return nil, fmt.Errorf("listener %s: OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (sluice does not serve unsecured tokens)", listener)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "file" && u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("listener %s: sasl.oauthbearer.jwks.endpoint.url must be a file://, http:// or https:// URL", listener)
	}
	skew, err := strconv.Atoi(get("sasl.oauthbearer.clock.skew.seconds"))
	if err != nil || skew < 0 {
		return nil, fmt.Errorf("listener %s: sasl.oauthbearer.clock.skew.seconds must be a non-negative integer", listener)
	}
	v := &OAuthValidator{
		jwksURL: u, skew: time.Duration(skew) * time.Second,
		issuer: get("sasl.oauthbearer.expected.issuer"), subClaim: get("sasl.oauthbearer.sub.claim.name"),
		now: time.Now, reloadIv: time.Second,
	}
	if v.subClaim == "" {
		v.subClaim = "sub"
	}
	for _, a := range strings.Split(get("sasl.oauthbearer.expected.audience"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			v.audience = append(v.audience, a)
		}
	}
	keys, err := v.fetch()
	if err != nil {
		return nil, fmt.Errorf("listener %s: sasl.oauthbearer.jwks.endpoint.url: %w", listener, err)
	}
	v.keys, v.loaded = keys, time.Now()
	return v, nil
}

// fetch reads and parses the key set.
func (v *OAuthValidator) fetch() (map[string]crypto.PublicKey, error) {
	var body []byte
	switch v.jwksURL.Scheme {
	case "file":
		f, err := os.Open(v.jwksURL.Path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if body, err = io.ReadAll(io.LimitReader(f, maxJWKSBytes+1)); err != nil {
			return nil, err
		}
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.jwksURL.String(), nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("HTTP status %d", resp.StatusCode)
		}
		if body, err = io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1)); err != nil {
			return nil, err
		}
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("JWKS larger than %d bytes", maxJWKSBytes)
	}
	return ParseJWKS(body)
}

// jwk is one JSON Web Key (RFC 7517) of the types sluice verifies with.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// ParseJWKS parses a JSON Web Key Set ({"keys":[...]}), keeping the RSA
// and EC (P-256, P-384, P-521) signature keys; a key with "use" other
// than "sig", or of another type, is skipped. A set without a usable key
// is an error.
func ParseJWKS(b []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	out := map[string]crypto.PublicKey{}
	b64 := base64.RawURLEncoding
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var pub crypto.PublicKey
		switch k.Kty {
		case "RSA":
			n, err1 := b64.DecodeString(k.N)
			e, err2 := b64.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
				return nil, fmt.Errorf("JWKS: key %d: malformed RSA key", i)
			}
			pub = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			var curve elliptic.Curve
			switch k.Crv {
			case "P-256":
				curve = elliptic.P256()
			case "P-384":
				curve = elliptic.P384()
			case "P-521":
				curve = elliptic.P521()
			default:
				continue
			}
			x, err1 := b64.DecodeString(k.X)
			y, err2 := b64.DecodeString(k.Y)
			size := (curve.Params().BitSize + 7) / 8
			if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
				return nil, fmt.Errorf("JWKS: key %d: malformed EC key", i)
			}
			p, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, x...), y...))
			if err != nil {
				return nil, fmt.Errorf("JWKS: key %d: %w", i, err)
			}
			pub = p
		default:
			continue
		}
		id := k.Kid
		if id == "" {
			id = "\x00" + strconv.Itoa(i)
		}
		out[id] = pub
	}
	if len(out) == 0 {
		return nil, errors.New("JWKS: no RSA or EC signature key")
	}
	return out, nil
}

// keyFor resolves the verification keys of a token: the key named by its
// kid header (re-reading the key set, at most once a second, when the kid
// is unknown, so keys can be rotated), or every key when it names none.
func (v *OAuthValidator) keyFor(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	v.mu.Lock()
	defer v.mu.Unlock()
	if kid != "" {
		if k, ok := v.keys[kid]; ok {
			return k, nil
		}
		if time.Since(v.loaded) >= v.reloadIv {
			v.loaded = time.Now()
			if keys, err := v.fetch(); err == nil {
				v.keys = keys
			}
			if k, ok := v.keys[kid]; ok {
				return k, nil
			}
		}
		return nil, fmt.Errorf("no key with kid %q in the JWKS", kid)
	}
	set := jwt.VerificationKeySet{}
	for _, k := range v.keys {
		set.Keys = append(set.Keys, k)
	}
	return set, nil
}

// Validate checks a token and returns its principal name and expiry.
// The error says why, for the broker's log only.
func (v *OAuthValidator) Validate(token string) (principal string, exp time.Time, err error) {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512"}),
		jwt.WithExpirationRequired(), jwt.WithLeeway(v.skew), jwt.WithTimeFunc(v.now),
	}
	if len(v.audience) > 0 {
		opts = append(opts, jwt.WithAudience(v.audience...))
	}
	if v.issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.issuer))
	}
	claims := jwt.MapClaims{}
	if _, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, v.keyFor); err != nil {
		return "", time.Time{}, err
	}
	sub, _ := claims[v.subClaim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", time.Time{}, fmt.Errorf("the %s claim is missing or empty", v.subClaim)
	}
	e, err := claims.GetExpirationTime()
	if err != nil || e == nil {
		return "", time.Time{}, errors.New("no exp claim")
	}
	return sub, e.Time, nil
}

// OAuthError is a failed OAUTHBEARER authentication: Error is what the
// client is told (Kafka's JSON error), Reason what the broker logs.
type OAuthError struct {
	Message, Reason string
}

func (e *OAuthError) Error() string { return e.Message }

// LogDetail implements the protocol package's detail logging.
func (e *OAuthError) LogDetail() string { return e.Reason }

// oauthServer is one OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer).
type oauthServer struct {
	v       *OAuthValidator
	user    string
	exp     time.Time
	errJSON string // the error challenge sent, awaiting the client's %x01
	reason  string
}

// Step implements protocol.SASLServer.
func (s *oauthServer) Step(msg []byte) ([]byte, bool, error) {
	if len(msg) == 1 && msg[0] == 0x01 && s.errJSON != "" {
		return nil, false, &OAuthError{Message: s.errJSON, Reason: s.reason}
	}
	if s.errJSON != "" {
		return nil, false, &OAuthError{Message: errInvalidResponse.Error(), Reason: "expected the client's %x01 after the error challenge"}
	}
	r, err := ParseClientResponse(msg)
	if err != nil {
		return nil, false, &OAuthError{Message: errInvalidResponse.Error(), Reason: err.Error()}
	}
	sub, exp, err := s.v.Validate(r.Token)
	if err != nil {
		// RFC 7628 §3.2.2: the error is a challenge; the client answers
		// %x01 and only then is the exchange failed.
		s.errJSON, s.reason = `{"status":"invalid_token"}`, err.Error()
		return []byte(s.errJSON), false, nil
	}
	if r.AuthzID != "" && r.AuthzID != sub {
		return nil, false, &OAuthError{
			Message: fmt.Sprintf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", r.AuthzID, sub),
			Reason:  "authorization id differs from the token's principal"}
	}
	s.user, s.exp = sub, exp
	return nil, true, nil
}

// User implements protocol.SASLServer.
func (s *oauthServer) User() string { return s.user }

// CredentialExpiry is the token's expiry (KIP-368: a session lasts no
// longer than its token).
func (s *oauthServer) CredentialExpiry() time.Time { return s.exp }
