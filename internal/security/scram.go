package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"github.com/xdg-go/scram"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

// ScramCredential is a stored SCRAM credential (metadata.ScramCredential).
type ScramCredential = metadata.ScramCredential

// maxScramMessage bounds a SCRAM client message (a few hundred bytes in
// practice).
const maxScramMessage = 8 << 10

func scramHash(mech string) (scram.HashGeneratorFcn, func() hash.Hash, bool) {
	switch mech {
	case MechScramSHA256:
		return scram.SHA256, sha256.New, true
	case MechScramSHA512:
		return scram.SHA512, sha512.New, true
	}
	return nil, nil, false
}

// ScramFromSalted derives the stored credential from a salted password
// (what AlterUserScramCredentials carries): StoredKey = H(HMAC(salted,
// "Client Key")), ServerKey = HMAC(salted, "Server Key") (RFC 5802).
func ScramFromSalted(mech string, salt, salted []byte, iterations int32) (ScramCredential, error) {
	_, h, ok := scramHash(mech)
	if !ok {
		return ScramCredential{}, fmt.Errorf("unknown SCRAM mechanism %q", mech)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	d := h()
	d.Write(mac(salted, "Client Key"))
	return ScramCredential{Salt: append([]byte(nil), salt...), Iterations: iterations, StoredKey: d.Sum(nil), ServerKey: mac(salted, "Server Key")}, nil
}

// NewScramCredential salts a password (a random 32-byte salt) into a
// stored credential, as kafka-storage --add-scram does.
func NewScramCredential(mech, password string, iterations int32) (ScramCredential, error) {
	_, h, ok := scramHash(mech)
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

// scramServer is the server side of SCRAM-SHA-256/512 (Kafka's
// ScramSaslServer) on xdg-go/scram, with credentials from the metadata.
type scramServer struct {
	mech string
	conv *scram.ServerConversation
}

var errScramLookup = errors.New("no credential")

func newScramServer(mech string, lookup ScramLookup) protocol.SASLServer {
	gen, _, _ := scramHash(mech)
	srv, err := gen.NewServer(func(user string) (scram.StoredCredentials, error) {
		c, ok := lookup(mech, user)
		if !ok {
			return scram.StoredCredentials{}, errScramLookup
		}
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)}, StoredKey: c.StoredKey, ServerKey: c.ServerKey}, nil
	})
	if err != nil { // only for a nil lookup
		panic(err)
	}
	return &scramServer{mech: mech, conv: srv.NewConversation()}
}

// Step implements protocol.SASLServer. Every failure gets Kafka's one
// message, whatever went wrong (unknown user, bad proof, malformed
// message).
func (s *scramServer) Step(msg []byte) ([]byte, bool, error) {
	fail := fmt.Errorf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", s.mech)
	if len(msg) > maxScramMessage || s.conv.Done() {
		return nil, false, fail
	}
	reply, err := s.conv.Step(string(msg))
	if err != nil {
		return nil, false, fail
	}
	if s.conv.Done() {
		if !s.conv.Valid() {
			return nil, false, fail
		}
		if a := s.conv.AuthzID(); a != "" && a != s.conv.Username() {
			return nil, false, fmt.Errorf("Authentication failed: Client requested an authorization id that is different from username")
		}
		return []byte(reply), true, nil
	}
	return []byte(reply), false, nil
}

// User implements protocol.SASLServer.
func (s *scramServer) User() string { return s.conv.Username() }
