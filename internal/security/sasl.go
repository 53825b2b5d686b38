package security

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/protocol"
)

// SASL mechanism names.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
)

// supported reports whether sluice serves a mechanism.
func supported(m string) bool {
	return m == MechPlain || m == MechScramSHA256 || m == MechScramSHA512 || m == MechOAuthBearer
}

// EnabledMechanisms returns a listener's sasl.enabled.mechanisms
// (listener.name.<l>.sasl.enabled.mechanisms overriding it). Kafka's
// default, GSSAPI, is not served, so a SASL listener must name its
// mechanisms; one sluice does not serve is an error.
func EnabledMechanisms(cfg *config.Broker, listener string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(cfg.Setting(listener, "sasl.enabled.mechanisms"), ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		if m == "" {
			continue
		}
		if !supported(m) {
			return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s is not supported (sluice serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER)", listener, m)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("listener %s: sasl.enabled.mechanisms is empty", listener)
	}
	return out, nil
}

// JAASFor returns the JAAS configuration of a mechanism on a listener:
// listener.name.<l>.<mechanism>.sasl.jaas.config (Kafka's broker form),
// else listener.name.<l>.sasl.jaas.config, <mechanism>.sasl.jaas.config,
// sasl.jaas.config. ok is false if none is set.
func JAASFor(cfg *config.Broker, listener, mech string) (j JAAS, ok bool, err error) {
	l, m := strings.ToLower(listener), strings.ToLower(mech)
	for _, key := range []string{
		"listener.name." + l + "." + m + ".sasl.jaas.config",
		"listener.name." + l + ".sasl.jaas.config",
		m + ".sasl.jaas.config",
		"sasl.jaas.config",
	} {
		if v, set := cfg.Props[key]; set && strings.TrimSpace(v) != "" {
			j, err := ParseJAAS(v)
			if err != nil {
				return JAAS{}, false, fmt.Errorf("%s: %w", key, err)
			}
			return j, true, nil
		}
	}
	return JAAS{}, false, nil
}

// ScramLookup finds a user's stored SCRAM credential for a mechanism.
type ScramLookup func(mech, user string) (ScramCredential, bool)

// ListenerSASL builds the SASL side of a SASL_PLAINTEXT or SASL_SSL
// listener: its enabled mechanisms, PLAIN's users from the listener's
// PlainLoginModule JAAS options user_<name>="<password>", SCRAM's
// credentials through lookup, OAUTHBEARER's token validation
// (NewOAuthValidator), connection.failed.authentication.delay.ms and
// connections.max.reauth.ms (KIP-368; per mechanism as
// listener.name.<l>.<mechanism>.connections.max.reauth.ms).
func ListenerSASL(cfg *config.Broker, listener string, lookup ScramLookup) (*protocol.SASL, error) {
	mechs, err := EnabledMechanisms(cfg, listener)
	if err != nil {
		return nil, err
	}
	var users map[string]string
	var oauth *OAuthValidator
	reauth := map[string]time.Duration{}
	for _, m := range mechs {
		if ms, err := reauthMillis(cfg, listener, m); err != nil {
			return nil, err
		} else if ms > 0 {
			reauth[m] = time.Duration(ms) * time.Millisecond
		}
		if m == MechOAuthBearer {
			if oauth, err = NewOAuthValidator(cfg, listener); err != nil {
				return nil, err
			}
			continue
		}
		if m != MechPlain {
			continue
		}
		j, ok, err := JAASFor(cfg, listener, m)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("listener %s: PLAIN needs listener.name.%s.plain.sasl.jaas.config with user_<name>=\"<password>\" options", listener, strings.ToLower(listener))
		}
		if j.Module != PlainLoginModule {
			return nil, fmt.Errorf("listener %s: PLAIN: the JAAS login module must be %s", listener, PlainLoginModule)
		}
		users = map[string]string{}
		for k, v := range j.Options {
			if u, ok := strings.CutPrefix(k, "user_"); ok && u != "" {
				users[u] = v
			}
		}
		if len(users) == 0 {
			return nil, fmt.Errorf("listener %s: PLAIN: no user_<name>=\"<password>\" option in the JAAS configuration", listener)
		}
	}
	delay := time.Duration(cfg.Int("connection.failed.authentication.delay.ms", 100)) * time.Millisecond
	return &protocol.SASL{Mechanisms: mechs, FailureDelay: delay, MaxReauth: reauth, Server: func(m string) protocol.SASLServer {
		switch m {
		case MechPlain:
			return &plainServer{users: users}
		case MechOAuthBearer:
			return &oauthServer{v: oauth}
		default:
			return newScramServer(m, lookup)
		}
	}}, nil
}

// reauthMillis is connections.max.reauth.ms for a mechanism on a
// listener: listener.name.<l>.<mechanism>.connections.max.reauth.ms, else
// the listener's or broker's value (0: sessions do not expire).
func reauthMillis(cfg *config.Broker, listener, mech string) (int64, error) {
	v, ok := cfg.Props["listener.name."+strings.ToLower(listener)+"."+strings.ToLower(mech)+".connections.max.reauth.ms"]
	if !ok {
		v = cfg.Setting(listener, "connections.max.reauth.ms")
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("listener %s: connections.max.reauth.ms must be a non-negative integer", listener)
	}
	return ms, nil
}

// errBadCredentials is Kafka's message for a wrong user or password.
var errBadCredentials = errors.New("Authentication failed: Invalid username or password")

// plainServer is SASL/PLAIN (RFC 4616) against the JAAS users (Kafka's
// PlainServer with PlainServerCallbackHandler).
type plainServer struct {
	users map[string]string
	user  string
}

// Step implements protocol.SASLServer.
func (s *plainServer) Step(msg []byte) ([]byte, bool, error) {
	parts := strings.Split(string(msg), "\x00")
	if len(parts) != 3 {
		return nil, false, errors.New("Invalid SASL/PLAIN response: expected 3 tokens")
	}
	authz, user, pass := parts[0], parts[1], parts[2]
	if user == "" {
		return nil, false, errors.New("Authentication failed: username not specified")
	}
	if pass == "" {
		return nil, false, errors.New("Authentication failed: password not specified")
	}
	if authz != "" && authz != user {
		return nil, false, errors.New("Authentication failed: Client requested an authorization id that is different from username")
	}
	want, ok := s.users[user]
	// Compare even for an unknown user, so timing tells nothing.
	if subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 || !ok {
		return nil, false, errBadCredentials
	}
	s.user = user
	return nil, true, nil
}

// User implements protocol.SASLServer.
func (s *plainServer) User() string { return s.user }

// InterBrokerSASL returns the mechanism the inter-broker client
// authenticates with on a SASL inter-broker listener:
// sasl.mechanism.inter.broker.protocol with the username and password of
// that mechanism's JAAS configuration on the listener (Kafka's broker
// reads its own credentials there too).
func InterBrokerSASL(cfg *config.Broker, listener string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(cfg.Setting(listener, "sasl.mechanism.inter.broker.protocol")))
	if !supported(mech) || mech == MechOAuthBearer {
		return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol=%s: the SASL inter-broker listener %s needs PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech, listener)
	}
	j, ok, err := JAASFor(cfg, listener, mech)
	if err != nil {
		return nil, err
	}
	user, pass := j.Options["username"], j.Options["password"]
	if !ok || user == "" || pass == "" {
		return nil, fmt.Errorf("inter-broker listener %s: the %s JAAS configuration (listener.name.%s.%s.sasl.jaas.config) needs username and password", listener, mech, strings.ToLower(listener), strings.ToLower(mech))
	}
	switch mech {
	case MechPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case MechScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
}
