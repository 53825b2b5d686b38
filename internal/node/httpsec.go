package node

import (
	"crypto/tls"
	"fmt"
	"sort"
	"strings"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/security"
	"github.com/sluice-io/sluice/internal/status"
)

// httpListener is the listener name whose ssl.* settings the --http port
// takes (listener.name.http.ssl.*, falling back to ssl.*).
const httpListener = "HTTP"

// httpSecurity is what secures the --http port (docs/security.md).
type httpSecurity struct {
	// tls is the server configuration (nil: plain HTTP).
	tls *tls.Config
	// auth is the per-request policy.
	auth status.Auth
	// peerTLS and peerToken fetch the other nodes' /api/v1/node.
	peerTLS   *tls.Config
	peerToken func() string
}

// httpSecurityFrom reads sluice.http.ssl.enable, the HTTP listener's
// ssl.* settings and sluice.http.auth.bearer.token(.file), refusing
// inconsistent ones.
func httpSecurityFrom(cfg *config.Broker) (*httpSecurity, error) {
	hs := &httpSecurity{}
	// A Kafka listener named HTTP would share the port's
	// listener.name.http.* settings: refuse the ambiguity.
	if ls, err := cfg.KafkaListeners(); err == nil {
		for _, l := range ls {
			if l.Name == httpListener {
				return nil, fmt.Errorf("listeners: the name %s is reserved for the --http port's listener.name.http.* settings; rename the Kafka listener", httpListener)
			}
		}
	}
	if cfg.Bool("sluice.http.ssl.enable", false) {
		tc, err := security.ServerTLS(cfg, httpListener)
		if err != nil {
			return nil, fmt.Errorf("sluice.http.ssl.enable=true: %w", err)
		}
		switch tc.ClientAuth {
		case tls.RequireAndVerifyClientCert:
			// ssl.client.auth=required: the handshake only requests the
			// certificate, the handler demands it on every path but
			// the health checks (which probes reach without one).
			tc.ClientAuth = tls.VerifyClientCertIfGiven
			hs.auth.CertRequired = true
			hs.auth.CertAccepted = true
		case tls.VerifyClientCertIfGiven:
			hs.auth.CertAccepted = true
		}
		hs.tls = tc
		if hs.peerTLS, err = security.ClientTLS(cfg, httpListener); err != nil {
			return nil, fmt.Errorf("sluice.http.ssl.enable=true: %w", err)
		}
	} else {
		// listener.name.http.* only means something with TLS on: refuse
		// it rather than serve plain HTTP to someone who asked for
		// certificates.
		var stray []string
		for _, k := range httpOnlyKeys(cfg) {
			if strings.HasPrefix(strings.ToLower(k), "listener.name.http.") {
				stray = append(stray, k)
			}
		}
		if len(stray) > 0 {
			return nil, fmt.Errorf("%s set but sluice.http.ssl.enable is false: the --http port would serve plain HTTP; set sluice.http.ssl.enable=true", strings.Join(stray, ", "))
		}
	}
	token, _ := cfg.Get("sluice.http.auth.bearer.token")
	token = strings.TrimSpace(token)
	file, _ := cfg.Get("sluice.http.auth.bearer.token.file")
	switch {
	case file != "":
		tf, err := status.OpenTokenFile(file, token)
		if err != nil {
			return nil, fmt.Errorf("sluice.http.auth.bearer.token.file: %w", err)
		}
		hs.auth.Tokens = tf.Tokens
	case token != "":
		hs.auth.Tokens = status.StaticTokens(token)
	}
	if hs.auth.Tokens != nil {
		tokens := hs.auth.Tokens
		hs.peerToken = func() string {
			if t := tokens(); len(t) > 0 {
				return string(t[0])
			}
			return ""
		}
	}
	return hs, nil
}

// httpOnlyKeys lists the configured settings that only concern the --http
// port (sluice.http.*, listener.name.http.*), sorted.
func httpOnlyKeys(cfg *config.Broker) []string {
	var keys []string
	for k := range cfg.Props {
		if l := strings.ToLower(k); strings.HasPrefix(l, "sluice.http.") || strings.HasPrefix(l, "listener.name.http.") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
