// Package security builds what sluice's listeners and inter-broker client
// need to authenticate (docs/security.md): TLS configurations from Kafka's
// ssl.* settings (PEM key and trust stores), SASL server mechanisms
// (PLAIN from a JAAS configuration, SCRAM-SHA-256/512 from the replicated
// credentials) and the client side of the inter-broker mechanism.
package security

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/internal/config"
)

// maxPEMBytes bounds a key or trust store file.
const maxPEMBytes = 4 << 20

// ServerTLS returns the TLS configuration of an SSL or SASL_SSL listener
// from its ssl.* settings (listener.name.<listener>.ssl.* overriding
// ssl.*): its certificate and key, the CAs that verify client
// certificates, ssl.client.auth and ssl.enabled.protocols. Key and trust
// stores read from files are re-read when the files change (stores):
// new connections get the new certificate, connections already open keep
// theirs.
func ServerTLS(cfg *config.Broker, listener string) (*tls.Config, error) {
	st, err := loadStores(cfg, listener)
	if err != nil {
		return nil, err
	}
	if st.cert == nil {
		return nil, fmt.Errorf("listener %s: TLS needs a key store: set ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key) with ssl.keystore.type=PEM", listener)
	}
	min, max := tlsVersions(cfg.Setting(listener, "ssl.enabled.protocols"))
	tc := &tls.Config{Certificates: []tls.Certificate{*st.cert}, MinVersion: min, MaxVersion: max, ClientCAs: st.pool}
	switch auth := cfg.Setting(listener, "ssl.client.auth"); auth {
	case "required", "requested":
		if st.pool == nil {
			return nil, fmt.Errorf("listener %s: ssl.client.auth=%s needs a trust store (ssl.truststore.location) to verify client certificates", listener, auth)
		}
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		if auth == "requested" {
			tc.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	if st.reloads() {
		base := tc.Clone()
		tc.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := st.serverConfig(base)
			// A caller may change ClientAuth before serving (the
			// --http port asks for certificates at the TLS level and
			// demands them per path): the returned config follows.
			c.ClientAuth = tc.ClientAuth
			return c, nil
		}
	}
	return tc, nil
}

// ClientTLS returns the inter-broker client's TLS configuration from the
// inter-broker listener's ssl.* settings: the broker's own certificate (if
// it has a key store) as client certificate, the trust store (else the
// system's CAs) for the leaders' certificates, and the host name check of
// ssl.endpoint.identification.algorithm. Stores read from files are
// re-read when the files change, as for ServerTLS: the certificate
// presented is the key store file's current one; the trust store file's
// current CAs verify servers through ForHost's copies (and always without
// the name check). Use it through ForHost.
func ClientTLS(cfg *config.Broker, listener string) (*tls.Config, error) {
	st, err := loadStores(cfg, listener)
	if err != nil {
		return nil, err
	}
	min, max := tlsVersions(cfg.Setting(listener, "ssl.enabled.protocols"))
	tc := &tls.Config{RootCAs: st.pool, MinVersion: min, MaxVersion: max}
	if st.cert != nil {
		tc.Certificates = []tls.Certificate{*st.cert}
		if st.keyFile != "" {
			// Takes precedence over Certificates.
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				cert, _ := st.current()
				return cert, nil
			}
		}
	}
	checkName := cfg.Setting(listener, "ssl.endpoint.identification.algorithm") != ""
	verify := func(host string) func(tls.ConnectionState) error {
		return func(cs tls.ConnectionState) error { return verifyServer(st, checkName, host, cs) }
	}
	switch {
	case !checkName:
		// Verify the chain, not the name (Kafka with an empty
		// algorithm), with the trust store in use.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = verify("")
	case st.trustFile != "":
		// Go verifies the chain and the name with the trust store read
		// at start; ForHost's copies verify with the trust store in use.
		hostVerifiers.Store(tc, verify)
	}
	return tc, nil
}

// hostVerifiers holds, for a ClientTLS configuration with a trust store
// file and the name check, how to check a server's certificate for one
// host with the trust store in use: ForHost binds the host, which the
// connection state does not carry when it is an IP address (no SNI is
// sent).
var hostVerifiers sync.Map // *tls.Config → func(host string) func(tls.ConnectionState) error

// verifyServer verifies a server's certificate chain with the trust
// store in use (the system's CAs without one), and its name against host
// when checkName is set.
func verifyServer(st *stores, checkName bool, host string, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: no server certificate")
	}
	_, roots := st.current()
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	if checkName {
		if host == "" {
			return errors.New("tls: no server name to check the certificate against")
		}
		opts.DNSName = host
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// ForHost returns a copy of a ClientTLS configuration for dialing addr
// (host:port): the host is the name the certificate must carry. Unlike
// the ClientTLS configuration itself, the copy verifies the server with
// the trust store file's current contents.
func ForHost(tc *tls.Config, addr string) *tls.Config {
	c := tc.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		c.ServerName = host
		if v, ok := hostVerifiers.Load(tc); ok {
			c.InsecureSkipVerify = true // VerifyConnection checks chain and name
			c.VerifyConnection = v.(func(string) func(tls.ConnectionState) error)(host)
		}
	}
	return c
}

// tlsVersions maps ssl.enabled.protocols (checked by its definition) to
// a version range; TLS 1.2 is the floor.
func tlsVersions(list string) (min, max uint16) {
	min, max = tls.VersionTLS13, tls.VersionTLS12
	for _, e := range strings.Split(list, ",") {
		v := uint16(0)
		switch strings.ToUpper(strings.TrimSpace(e)) {
		case "TLSV1.2":
			v = tls.VersionTLS12
		case "TLSV1.3":
			v = tls.VersionTLS13
		}
		if v != 0 {
			min, max = minU(min, v), maxU(max, v)
		}
	}
	if max < min { // nothing usable listed: the default
		return tls.VersionTLS12, tls.VersionTLS13
	}
	return min, max
}

func minU(a, b uint16) uint16 {
	if a < b {
		return a
	}
	return b
}

func maxU(a, b uint16) uint16 {
	if a > b {
		return a
	}
	return b
}

// keyStore loads the listener's certificate chain and key (nil if none is
// configured).
func keyStore(cfg *config.Broker, listener string) (*tls.Certificate, error) {
	loc := cfg.Setting(listener, "ssl.keystore.location")
	chain := cfg.Setting(listener, "ssl.keystore.certificate.chain")
	key := cfg.Setting(listener, "ssl.keystore.key")
	if loc == "" && chain == "" && key == "" {
		return nil, nil
	}
	if t := cfg.Setting(listener, "ssl.keystore.type"); !strings.EqualFold(t, "PEM") {
		return nil, fmt.Errorf("listener %s: ssl.keystore.type=%s: sluice reads PEM key stores only (set ssl.keystore.type=PEM)", listener, t)
	}
	if cfg.Setting(listener, "ssl.key.password") != "" {
		return nil, fmt.Errorf("listener %s: ssl.key.password is set: encrypted private keys are not supported; give an unencrypted PEM key", listener)
	}
	var blocks []*pem.Block
	var err error
	what := "ssl.keystore.location " + loc
	if loc != "" {
		if chain != "" || key != "" {
			return nil, fmt.Errorf("listener %s: set either ssl.keystore.location or ssl.keystore.certificate.chain and ssl.keystore.key, not both", listener)
		}
		var b []byte
		if b, err = readBounded(loc); err == nil {
			blocks, err = decodePEM(string(b))
		}
	} else {
		what = "ssl.keystore.certificate.chain / ssl.keystore.key"
		var cb, kb []*pem.Block
		if cb, err = decodePEM(chain); err == nil {
			kb, err = decodePEM(key)
			blocks = append(cb, kb...)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listener %s: %s: %v", listener, what, err)
	}
	var certPEM, keyPEM []byte
	for _, b := range blocks {
		switch {
		case b.Type == "CERTIFICATE":
			certPEM = append(certPEM, pem.EncodeToMemory(b)...)
		case b.Type == "ENCRYPTED PRIVATE KEY" || b.Headers["Proc-Type"] != "":
			return nil, fmt.Errorf("listener %s: %s: encrypted private keys are not supported", listener, what)
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			if keyPEM != nil {
				return nil, fmt.Errorf("listener %s: %s: more than one private key", listener, what)
			}
			keyPEM = pem.EncodeToMemory(b)
		}
	}
	if certPEM == nil || keyPEM == nil {
		return nil, fmt.Errorf("listener %s: %s: want a private key and its certificate chain in PEM", listener, what)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %s: %v", listener, what, err)
	}
	return &cert, nil
}

// trustStore loads the listener's trusted CAs (nil if none configured).
func trustStore(cfg *config.Broker, listener string) (*x509.CertPool, error) {
	loc := cfg.Setting(listener, "ssl.truststore.location")
	inline := cfg.Setting(listener, "ssl.truststore.certificates")
	if loc == "" && inline == "" {
		return nil, nil
	}
	if t := cfg.Setting(listener, "ssl.truststore.type"); !strings.EqualFold(t, "PEM") {
		return nil, fmt.Errorf("listener %s: ssl.truststore.type=%s: sluice reads PEM trust stores only (set ssl.truststore.type=PEM)", listener, t)
	}
	what, text := "ssl.truststore.certificates", inline
	if loc != "" {
		what = "ssl.truststore.location " + loc
		b, err := readBounded(loc)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %s: %v", listener, what, err)
		}
		text = string(b)
	}
	blocks, err := decodePEM(text)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %s: %v", listener, what, err)
	}
	pool := x509.NewCertPool()
	n := 0
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %s: %v", listener, what, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("listener %s: %s: no certificate", listener, what)
	}
	return pool, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEMBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxPEMBytes)
	}
	return b, nil
}

// decodePEM decodes PEM blocks leniently, as Kafka's PEM stores do: the
// text between "-----BEGIN X-----" and "-----END X-----" may have lost its
// line breaks (a server.properties value continued with backslashes is
// joined into one line). Headers (encrypted legacy keys) are kept only
// in the strict form.
func decodePEM(text string) ([]*pem.Block, error) {
	var out []*pem.Block
	rest := text
	for {
		i := strings.Index(rest, "-----BEGIN ")
		if i < 0 {
			break
		}
		rest = rest[i+len("-----BEGIN "):]
		j := strings.Index(rest, "-----")
		if j < 0 {
			return nil, errors.New("PEM: unterminated BEGIN line")
		}
		typ := rest[:j]
		rest = rest[j+5:]
		end := "-----END " + typ + "-----"
		k := strings.Index(rest, end)
		if k < 0 {
			return nil, fmt.Errorf("PEM: no %q", end)
		}
		body := rest[:k]
		rest = rest[k+len(end):]
		if strings.Contains(body, ":") {
			// Legacy headers (Proc-Type: 4,ENCRYPTED): strict decoding.
			if b, _ := pem.Decode([]byte("-----BEGIN " + typ + "-----" + body + end + "\n")); b != nil {
				out = append(out, b)
				continue
			}
			out = append(out, &pem.Block{Type: typ, Headers: map[string]string{"Proc-Type": "?"}})
			continue
		}
		der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
		if err != nil {
			return nil, fmt.Errorf("PEM %s: %v", typ, err)
		}
		out = append(out, &pem.Block{Type: typ, Bytes: der})
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM block")
	}
	return out, nil
}
