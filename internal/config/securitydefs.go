package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-io/sluice/internal/acl"
)

// securityDefs are the security settings (Kafka's BrokerSecurityConfigs
// and SslConfigs; docs/security.md). Each ssl.* and sasl.* setting may be
// given per listener as listener.name.<listener>.<setting> (the listener
// name in lower case, as Kafka writes it), which wins over the unprefixed
// one for that listener; a SASL setting may also be given per mechanism,
// listener.name.<listener>.<mechanism>.<setting>.
var securityDefs = []Def{
	{Name: "authorizer.class.name", Type: TypeClass, Default: "", Check: checkAuthorizerClass, Form: "org.apache.kafka.metadata.authorizer.StandardAuthorizer", Doc: "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or kafka.security.authorizer.AclAuthorizer, decided the same way) enables ACLs: every request is authorized as Kafka's StandardAuthorizer does, against the ACLs stored with CreateAcls. Empty: no authorization (every principal may do everything) and CreateAcls, DescribeAcls and DeleteAcls answer SECURITY_DISABLED. Other classes are refused at start."},
	{Name: "super.users", Type: TypeString, Default: "", Form: "User:admin;User:broker", Doc: "Principals, separated by ';', allowed everything whatever the ACLs. Include the brokers' own inter-broker principal (User:ANONYMOUS on a PLAINTEXT or SSL inter-broker listener without client certificates), or followers are refused CLUSTER_ACTION."},
	{Name: "allow.everyone.if.no.acl.found", Type: TypeBoolean, Default: "false", Doc: "With an authorizer: a resource that no ACL names (literally, by prefix or by *) is open to every principal when true, closed to all but super users when false."},
	{Name: "principal.builder.class", Type: TypeClass, Default: "", Status: StatusRefused, Refuse: refuseOtherThan("a custom KafkaPrincipalBuilder", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"), Refuses: "any class but DefaultKafkaPrincipalBuilder", Doc: "The principal is built as Kafka's DefaultKafkaPrincipalBuilder does: User:<SASL user>, else User:<client certificate subject DN> (ssl.principal.mapping.rules), else User:ANONYMOUS. A custom builder would name principals otherwise, and ACLs would apply to other names: refused at start."},

	// SASL (SASL_PLAINTEXT and SASL_SSL listeners).
	{Name: "sasl.enabled.mechanisms", Type: TypeList, Default: "GSSAPI", Doc: "The SASL mechanisms of a SASL listener. sluice serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (JWTs verified with sasl.oauthbearer.jwks.endpoint.url); Kafka's default, GSSAPI, is refused at start, so a SASL listener must name its mechanisms. A client asking for another gets UNSUPPORTED_SASL_MECHANISM with this list."},
	{Name: "sasl.mechanism.inter.broker.protocol", Type: TypeString, Default: "GSSAPI", Doc: "The mechanism followers authenticate with when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), with the username and password of listener.name.<listener>.<mechanism>.sasl.jaas.config."},
	{Name: "sasl.mechanism.controller.protocol", Type: TypeString, Default: "GSSAPI", Status: StatusIgnored, Doc: "The controller listener is PLAINTEXT or SSL (mTLS), never SASL."},
	{Name: "sasl.jaas.config", Type: TypePassword, Default: "", Doc: "JAAS login module configuration, normally given per listener and mechanism as listener.name.<listener>.<mechanism>.sasl.jaas.config (then <mechanism>.sasl.jaas.config and sasl.jaas.config are the fallbacks). PLAIN: org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"...\" user_admin=\"...\" user_alice=\"...\"; (user_<name> are the accepted users; username and password are this broker's own, for the inter-broker client). SCRAM: org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"...\"; (the inter-broker client's credentials; users are stored with AlterUserScramCredentials)."},
	{Name: "connection.failed.authentication.delay.ms", Type: TypeInt, Default: "100", Min: 0, Max: 10000, Doc: "Delay, in milliseconds, before the answer to a failed SASL authentication (the connection is then closed), to slow down password guessing."},
	{Name: "sasl.server.max.receive.size", Type: TypeInt, Default: "524288", Status: StatusIgnored, Doc: "Requests before authentication are bounded at 512 KiB."},
	{Name: "sluice.scram.bootstrap.credentials", Type: TypePassword, Default: "", Check: checkScramBootstrap, Form: "SCRAM-SHA-256=[name=USER,password=PASSWORD];...", Doc: "sluice only (Kafka bootstraps SCRAM users with kafka-storage format --add-scram, whose entry syntax this takes): SCRAM credentials created through the controller at start when the user has none for that mechanism, so the first admin can log in before any AlterUserScramCredentials. Entries MECHANISM=[name=USER,password=PASSWORD(,iterations=N)] separated by ';'; quote a password holding ',', ']' or ';'. Remove it once the cluster runs: a node started with it re-creates a deleted user (docs/security.md)."},
	{Name: "sluice.http.debug.enable", Type: TypeBoolean, Default: "false", Doc: "sluice only: serve the Go profiles (/debug/pprof/) on the --http listener, behind the same credentials as the rest of it (sluice.http.auth.bearer.token, client certificates). Off by default; the console, /api/v1, /metrics stay served (docs/security.md)."},
	{Name: "sluice.http.ssl.enable", Type: TypeBoolean, Default: "false", Doc: "sluice only: serve the --http port over TLS (https) with the ssl.* settings of a listener named HTTP: listener.name.http.ssl.keystore.location, listener.name.http.ssl.client.auth and so on, falling back to the unprefixed ssl.* settings as a Kafka listener does. A key store is then required (refused at start without one). ssl.client.auth=requested: a client certificate verified by the trust store is a credential by itself; required: every request except /healthz and /readyz needs one (the handshake only requests it, so that probes without a certificate still reach the health checks). The other nodes' /api/v1/node are then fetched over https, with this node's key store as client certificate and its trust store."},
	{Name: "sluice.http.auth.bearer.token", Type: TypePassword, Default: "", Doc: "sluice only: when set, every request to the --http port except /healthz and /readyz needs the header Authorization: Bearer <token> (or, with sluice.http.ssl.enable and ssl.client.auth=requested, a verified client certificate); others get 401 with WWW-Authenticate: Bearer. Give every node the same token: the console fetches the other nodes' /api/v1/node with it. Without TLS the token crosses the network in clear."},
	{Name: "sluice.http.auth.bearer.token.file", Type: TypeString, Default: "", Form: "/etc/sluice/http-tokens", Doc: "sluice only: a file of accepted bearer tokens for the --http port, one per line (blank lines and # comments ignored), besides sluice.http.auth.bearer.token. Re-read when it changes (checked at most once a second), so tokens rotate without a restart; an unreadable or emptied file keeps the last tokens. Unreadable or empty at start: refused."},
	{Name: "connections.max.reauth.ms", Type: TypeLong, Default: "0", Min: 0, Max: math.MaxInt64, Doc: "KIP-368: when positive, a SASL session lasts at most this many milliseconds (for OAUTHBEARER, no longer than the token): SaslAuthenticate v1+ answers carry SessionLifetimeMillis, the client must re-authenticate on the same connection (SaslHandshake v1 and SaslAuthenticate, same mechanism and principal) before it ends, and an expired connection sending any other request is closed. Per mechanism as listener.name.<listener>.<mechanism>.connections.max.reauth.ms. 0: sessions never expire."},

	// Kerberos and login refresh: Kafka's per-broker dynamic SASL settings
	// of mechanisms sluice does not serve (GSSAPI) or does not need.
	{Name: "sasl.kerberos.service.name", Type: TypeString, Default: "", Status: StatusIgnored, Doc: "GSSAPI is not served."},
	{Name: "sasl.kerberos.kinit.cmd", Type: TypeString, Default: "/usr/bin/kinit", Status: StatusIgnored, Doc: "GSSAPI is not served."},
	{Name: "sasl.kerberos.ticket.renew.window.factor", Type: TypeDouble, Default: "0.8", Status: StatusIgnored, Doc: "GSSAPI is not served."},
	{Name: "sasl.kerberos.ticket.renew.jitter", Type: TypeDouble, Default: "0.05", Status: StatusIgnored, Doc: "GSSAPI is not served."},
	{Name: "sasl.kerberos.min.time.before.relogin", Type: TypeLong, Default: "60000", Status: StatusIgnored, Doc: "GSSAPI is not served."},
	{Name: "sasl.kerberos.principal.to.local.rules", Type: TypeList, Default: "DEFAULT", Status: StatusIgnored, Doc: "GSSAPI is not served."},
	{Name: "sasl.login.refresh.window.factor", Type: TypeDouble, Default: "0.8", Min: 0.5, Max: 1, Status: StatusIgnored, Doc: "The broker logs in with no refreshing login module."},
	{Name: "sasl.login.refresh.window.jitter", Type: TypeDouble, Default: "0.05", Min: 0, Max: 0.25, Status: StatusIgnored},
	{Name: "sasl.login.refresh.min.period.seconds", Type: TypeShort, Default: "60", Min: 0, Max: 900, Status: StatusIgnored},
	{Name: "sasl.login.refresh.buffer.seconds", Type: TypeShort, Default: "300", Min: 0, Max: 3600, Status: StatusIgnored},

	// OAUTHBEARER (KIP-255) token validation, Kafka's KIP-768 names; each
	// may be given per listener as listener.name.<l>.oauthbearer.<name>.
	{Name: "sasl.oauthbearer.jwks.endpoint.url", Type: TypeString, Default: "", Form: "file:///etc/sluice/jwks.json", Doc: "Where the JSON Web Key Set verifying OAUTHBEARER tokens is read: a file:// URL (a JWKS JSON file) or an http(s):// URL, read at start and again when a token names an unknown kid (at most once a second). Required when OAUTHBEARER is enabled; other schemes are refused at start. Keys: RSA and EC P-256/384/521 (RS256/384/512, ES256/384/512)."},
	{Name: "sasl.oauthbearer.clock.skew.seconds", Type: TypeInt, Default: "30", Min: 0, Max: math.MaxInt32, Doc: "Leeway, in seconds, when checking an OAUTHBEARER token's exp and nbf."},
	{Name: "sasl.oauthbearer.expected.audience", Type: TypeList, Default: "", Doc: "When set, an OAUTHBEARER token's aud must name one of these audiences."},
	{Name: "sasl.oauthbearer.expected.issuer", Type: TypeString, Default: "", Doc: "When set, an OAUTHBEARER token's iss must be this issuer."},
	{Name: "sasl.oauthbearer.sub.claim.name", Type: TypeString, Default: "sub", Doc: "The claim naming an OAUTHBEARER token's principal: User:<claim value>."},
	{Name: "sasl.oauthbearer.scope.claim.name", Type: TypeString, Default: "scope", Status: StatusIgnored, Doc: "Scopes are not checked."},
	{Name: "sasl.oauthbearer.jwks.endpoint.refresh.ms", Type: TypeLong, Default: "3600000", Status: StatusIgnored, Doc: "The key set is re-read when a token names an unknown kid, not periodically."},

	// TLS (SSL and SASL_SSL listeners, and the inter-broker client on one).
	{Name: "ssl.keystore.type", Type: TypeString, Default: "JKS", Doc: "Format of the key store. sluice reads PEM only: an SSL or SASL_SSL listener needs ssl.keystore.type=PEM (JKS and PKCS12 stores are refused at start)."},
	{Name: "ssl.keystore.location", Type: TypeString, Default: "", Doc: "PEM file holding the private key (unencrypted PKCS#8, PKCS#1 or EC) and the certificate chain, leaf first. Read at start, and again for new connections when the file changes (checked at most once a second; a file that does not parse leaves the previous certificate in use)."},
	{Name: "ssl.keystore.certificate.chain", Type: TypePassword, Default: "", Doc: "The certificate chain in PEM, inline (instead of ssl.keystore.location); line breaks may be dropped."},
	{Name: "ssl.keystore.key", Type: TypePassword, Default: "", Doc: "The private key in PEM, inline (with ssl.keystore.certificate.chain)."},
	{Name: "ssl.keystore.password", Type: TypePassword, Default: "", Status: StatusIgnored, Doc: "Not needed for a PEM key store."},
	{Name: "ssl.key.password", Type: TypePassword, Default: "", Doc: "Password of an encrypted private key. sluice does not read encrypted PEM keys: setting it is refused at start on a TLS listener."},
	{Name: "ssl.truststore.type", Type: TypeString, Default: "JKS", Doc: "Format of the trust store; PEM only (as ssl.keystore.type), required when a trust store is given."},
	{Name: "ssl.truststore.location", Type: TypeString, Default: "", Doc: "PEM file of the CA certificates that verify client certificates (ssl.client.auth) and, for the inter-broker client, the other brokers' certificates. Empty: the system's CAs for the client; none for client certificates. Re-read for new connections when the file changes, like ssl.keystore.location."},
	{Name: "ssl.truststore.certificates", Type: TypePassword, Default: "", Doc: "The trusted CA certificates in PEM, inline (instead of ssl.truststore.location)."},
	{Name: "ssl.truststore.password", Type: TypePassword, Default: "", Status: StatusIgnored, Doc: "Not needed for a PEM trust store."},
	{Name: "ssl.client.auth", Type: TypeString, Default: "none", Enum: []string{"required", "requested", "none"}, Doc: "Client certificates on a TLS listener: required (a client without a valid one is refused in the handshake), requested (verified if sent), none. A verified client's principal is User:<certificate subject DN>."},
	{Name: "ssl.enabled.protocols", Type: TypeList, Default: "TLSv1.2,TLSv1.3", Check: checkTLSVersions, Form: "TLSv1.2,TLSv1.3", Doc: "TLS versions accepted; sluice refuses anything older than TLSv1.2."},
	{Name: "ssl.protocol", Type: TypeString, Default: "TLSv1.3", Status: StatusIgnored, Doc: "The versions are ssl.enabled.protocols."},
	{Name: "ssl.cipher.suites", Type: TypeList, Default: "", Status: StatusIgnored, Doc: "Go's default TLS cipher suites are used."},
	{Name: "ssl.endpoint.identification.algorithm", Type: TypeString, Default: "https", Doc: "https: the inter-broker client checks that the leader's certificate names the host it dials (a DNS name or IP address SAN); empty: the chain is verified, the name is not."},
	{Name: "ssl.principal.mapping.rules", Type: TypeString, Default: "DEFAULT", Doc: "KIP-371 rules naming the principal of a client certificate on an SSL listener: RULE:pattern/replacement/[L|U] (a regexp matching the whole RFC 2253 subject DN; $1 groups) and DEFAULT (the DN), comma-separated, first match wins; no match fails the authentication. Checked at start."},
}

// checkAuthorizerClass accepts the authorizer classes sluice implements.
func checkAuthorizerClass(v string) error { return acl.CheckClass(v) }

// tlsVersions are the ssl.enabled.protocols sluice accepts.
var tlsVersions = []string{"TLSv1.2", "TLSv1.3"}

func checkTLSVersions(v string) error {
	elems := listElems(v)
	if len(elems) == 0 {
		return fmt.Errorf("expected a list of %s", strings.Join(tlsVersions, ", "))
	}
	for _, e := range elems {
		ok := false
		for _, t := range tlsVersions {
			if strings.EqualFold(e, t) {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("expected a list of %s (TLS older than 1.2 is refused)", strings.Join(tlsVersions, ", "))
		}
	}
	return nil
}

// listenerOverride splits listener.name.<listener>.[<mechanism>.]<setting>
// into the listener name (upper case) and the setting's definition.
func listenerOverride(name string) (listener string, d *Def, ok bool) {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return "", nil, false
	}
	l, setting, ok := strings.Cut(rest, ".")
	if !ok {
		return "", nil, false
	}
	if d, ok := BrokerDef(setting); ok {
		return strings.ToUpper(l), d, true
	}
	// A per-mechanism SASL setting: <mechanism>.<setting>.
	if _, s, ok := strings.Cut(setting, "."); ok {
		if d, ok := BrokerDef(s); ok {
			return strings.ToUpper(l), d, true
		}
	}
	return "", nil, false
}

// IsSensitive reports whether a broker setting's value is secret (a
// password, key or JAAS configuration, per-listener overrides included):
// it is never logged nor returned by DescribeConfigs.
func IsSensitive(name string) bool {
	d, ok := BrokerDef(name)
	if !ok {
		_, d, ok = listenerOverride(name)
	}
	if ok {
		return d.Type == TypePassword
	}
	return strings.Contains(name, "password") || strings.Contains(name, "jaas") || strings.HasSuffix(name, ".key")
}

// Setting returns a security setting for a listener:
// listener.name.<listener>.<name> if set, else <name>, else its default.
func (b *Broker) Setting(listener, name string) string {
	if v, ok := b.Props["listener.name."+strings.ToLower(listener)+"."+name]; ok {
		return strings.TrimSpace(v)
	}
	if v, ok := b.Get(name); ok {
		return strings.TrimSpace(v)
	}
	if d, ok := BrokerDef(name); ok {
		return d.Default
	}
	return ""
}

// ScramBootstrap is one credential of sluice.scram.bootstrap.credentials.
type ScramBootstrap struct {
	Mechanism, User, Password string
	Iterations                int32
}

// maxScramBootstrap bounds the bootstrap credentials.
const maxScramBootstrap = 100

// ParseScramBootstrap parses sluice.scram.bootstrap.credentials: entries
// in the form of kafka-storage format --add-scram,
// MECHANISM=[name=USER,password=PASSWORD(,iterations=N)], separated by
// ';'. A password with ',', ']' or ';' is double-quoted (\" and \\ escape
// inside). Iterations default to 4096, within [4096, 16384]. Errors never
// quote the value.
func ParseScramBootstrap(v string) ([]ScramBootstrap, error) {
	var out []ScramBootstrap
	rest := strings.TrimSpace(v)
	for rest != "" {
		if len(out) == maxScramBootstrap {
			return nil, fmt.Errorf("at most %d credentials", maxScramBootstrap)
		}
		mech, after, ok := strings.Cut(rest, "=[")
		mech = strings.ToUpper(strings.TrimSpace(mech))
		if !ok || (mech != "SCRAM-SHA-256" && mech != "SCRAM-SHA-512") {
			return nil, fmt.Errorf("expected SCRAM-SHA-256=[name=...,password=...] or SCRAM-SHA-512=[...] entries separated by ';'")
		}
		b := ScramBootstrap{Mechanism: mech, Iterations: 4096}
		rest = after
		for {
			key, after, ok := strings.Cut(rest, "=")
			if !ok {
				return nil, fmt.Errorf("%s entry: expected key=value", mech)
			}
			key, rest = strings.TrimSpace(key), after
			var val string
			if strings.HasPrefix(rest, `"`) {
				var sb strings.Builder
				i, closed := 1, false
				for ; i < len(rest); i++ {
					if rest[i] == '\\' && i+1 < len(rest) {
						i++
						sb.WriteByte(rest[i])
					} else if rest[i] == '"' {
						closed = true
						break
					} else {
						sb.WriteByte(rest[i])
					}
				}
				if !closed {
					return nil, fmt.Errorf("%s entry: unterminated quoted value", mech)
				}
				val, rest = sb.String(), rest[i+1:]
			} else {
				j := strings.IndexAny(rest, ",]")
				if j < 0 {
					return nil, fmt.Errorf("%s entry: missing ']'", mech)
				}
				val, rest = strings.TrimSpace(rest[:j]), rest[j:]
			}
			switch key {
			case "name":
				b.User = val
			case "password":
				b.Password = val
			case "iterations":
				n, err := strconv.Atoi(val)
				if err != nil || n < 4096 || n > 16384 {
					return nil, fmt.Errorf("%s entry: iterations must be in [4096, 16384]", mech)
				}
				b.Iterations = int32(n)
			default:
				return nil, fmt.Errorf("%s entry: unknown key %q (name, password, iterations)", mech, key)
			}
			rest = strings.TrimSpace(rest)
			if strings.HasPrefix(rest, ",") {
				rest = rest[1:]
				continue
			}
			if !strings.HasPrefix(rest, "]") {
				return nil, fmt.Errorf("%s entry: expected ',' or ']'", mech)
			}
			rest = strings.TrimSpace(rest[1:])
			break
		}
		if b.User == "" || b.Password == "" {
			return nil, fmt.Errorf("%s entry: name and password are required", mech)
		}
		out = append(out, b)
		if rest != "" {
			if !strings.HasPrefix(rest, ";") {
				return nil, fmt.Errorf("expected ';' between entries")
			}
			rest = strings.TrimSpace(rest[1:])
		}
	}
	return out, nil
}

func checkScramBootstrap(v string) error {
	_, err := ParseScramBootstrap(v)
	return err
}
