package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// ScramCredential is a stored SCRAM credential (metadata.ScramCredential).
type ScramCredential = metadata.ScramCredential

// maxScramMessage bounds a SCRAM client message (a few hundred bytes in
// practice).
const maxScramMessage = 8 << 10

// scramHash is a SCRAM mechanism's hash.
func scramHash(mech string) (func() hash.Hash, bool) {
	switch mech {
	case MechScramSHA256:
		return sha256.New, true
	case MechScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// ScramFromSalted derives the stored credential from a salted password
// (what AlterUserScramCredentials carries): StoredKey = H(HMAC(salted,
// "Client Key")), ServerKey = HMAC(salted, "Server Key") (RFC 5802).
func ScramFromSalted(mech string, salt, salted []byte, iterations int32) (ScramCredential, error) {
	h, ok := scramHash(mech)
	if !ok {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	d := h()
	d.Write(hmacOf(h, salted, []byte("Client Key")))
	return ScramCredential{Salt: append([]byte(nil), salt...), Iterations: iterations, StoredKey: d.Sum(nil), ServerKey: hmacOf(h, salted, []byte("Server Key"))}, nil
}

// NewScramCredential salts a password (a random 32-byte salt) into a
// stored credential, as kafka-storage --add-scram does.
func NewScramCredential(mech, password string, iterations int32) (ScramCredential, error) {
	h, ok := scramHash(mech)
	if !ok {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := pbkdf2.Key(h, password, salt, int(iterations), h().Size())
	if err != nil {
		return ScramCredential{}, err
	}
	return ScramFromSalted(mech, salt, salted, iterations)
}

// scramServer is the server side of SCRAM-SHA-256/512 (RFC 5802 as
// Kafka's ScramSaslServer serves it), with credentials from the metadata.
// Like Kafka it accepts a client-final nonce that ends with the nonce it
// sent rather than equals it: librdkafka (kcat, confluent-kafka-*) sends
// its own nonce in front of the combined one, and Kafka checks endsWith.
// That is why this is not xdg-go/scram's server, which insists on
// equality (its client-side primitives are not needed either: the
// credential derivation is in ScramFromSalted).
type scramServer struct {
	mech   string
	h      func() hash.Hash
	lookup ScramLookup
	state  int // 0: want client-first, 1: want client-final, 2: done
	user   string
	gs2    string // the client-first's GS2 header, e.g. "n,,"
	first  string // client-first-message-bare
	server string // server-first-message
	nonce  string // client nonce + server nonce
	cred   ScramCredential
}

func newScramServer(mech string, lookup ScramLookup) protocol.SASLServer {
	h, _ := scramHash(mech)
	return &scramServer{mech: mech, h: h, lookup: lookup}
}

// Step implements protocol.SASLServer. Every failure gets Kafka's one
// message, whatever went wrong (unknown user, bad proof, malformed
// message).
func (s *scramServer) Step(msg []byte) ([]byte, bool, error) {
	fail := fmt.Errorf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", s.mech)
	if len(msg) > maxScramMessage || !utf8.Valid(msg) {
		s.state = 2
		return nil, false, fail
	}
	var reply string
	var err error
	switch s.state {
	case 0:
		reply, err = s.clientFirst(string(msg))
		s.state = 1
	case 1:
		reply, err = s.clientFinal(string(msg))
		s.state = 2
		if err == nil {
			return []byte(reply), true, nil
		}
	default:
		err = errors.New("exchange over")
	}
	if err != nil {
		s.state = 2
		if errors.Is(err, errAuthzID) {
			return nil, false, err
		}
		return nil, false, fail
	}
	return []byte(reply), false, nil
}

var errAuthzID = errors.New("Authentication failed: Client requested an authorization id that is different from username")

// clientFirst reads gs2-header client-first-message-bare:
// "n,[a=authzid],n=user,r=nonce[,extensions]" and answers
// "r=nonce,s=salt,i=iterations".
func (s *scramServer) clientFirst(m string) (string, error) {
	parts := strings.SplitN(m, ",", 3)
	if len(parts) != 3 || (parts[0] != "n" && parts[0] != "y") {
		return "", errors.New("bad GS2 header (channel binding is not supported)")
	}
	s.gs2 = parts[0] + "," + parts[1] + ","
	s.first = parts[2]
	attrs := strings.Split(s.first, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) < 3 {
		return "", errors.New("bad client-first message")
	}
	user, ok := saslName(attrs[0][2:])
	if !ok || user == "" {
		return "", errors.New("bad user name")
	}
	if a, found := strings.CutPrefix(parts[1], "a="); found {
		if authz, ok := saslName(a); !ok || authz != user {
			return "", errAuthzID
		}
	} else if parts[1] != "" {
		return "", errors.New("bad GS2 header")
	}
	cred, ok := s.lookup(s.mech, user)
	if !ok {
		return "", errors.New("unknown user")
	}
	var sn [24]byte
	rand.Read(sn[:])
	s.user, s.cred = user, cred
	s.nonce = attrs[1][2:] + base64.RawURLEncoding.EncodeToString(sn[:])
	s.server = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	return s.server, nil
}

// clientFinal reads "c=channel-binding,r=nonce[,extensions],p=proof",
// verifies the proof against StoredKey and answers "v=ServerSignature".
func (s *scramServer) clientFinal(m string) (string, error) {
	i := strings.LastIndex(m, ",p=")
	if i < 0 {
		return "", errors.New("no proof")
	}
	withoutProof, proofB64 := m[:i], m[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(s.gs2)) || !strings.HasPrefix(attrs[1], "r=") {
		return "", errors.New("bad channel binding or nonce")
	}
	if !strings.HasSuffix(attrs[1][2:], s.nonce) { // Kafka: endsWith
		return "", errors.New("nonce mismatch")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != len(s.cred.StoredKey) {
		return "", errors.New("bad proof")
	}
	auth := []byte(s.first + "," + s.server + "," + withoutProof)
	sig := hmacOf(s.h, s.cred.StoredKey, auth)
	clientKey := make([]byte, len(proof))
	for k := range proof {
		clientKey[k] = proof[k] ^ sig[k]
	}
	d := s.h()
	d.Write(clientKey)
	if subtle.ConstantTimeCompare(d.Sum(nil), s.cred.StoredKey) != 1 {
		return "", errors.New("bad proof")
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacOf(s.h, s.cred.ServerKey, auth)), nil
}

// User implements protocol.SASLServer.
func (s *scramServer) User() string { return s.user }

func hmacOf(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// saslName decodes a SCRAM saslname ("=2C" is ',', "=3D" is '='; any
// other '=' is invalid).
func saslName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			sb.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			sb.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			sb.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return sb.String(), true
}
