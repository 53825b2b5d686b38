package admin

// --command-config: a Kafka client properties file, as kafka-topics.sh and
// the other Kafka tools take it (--command-config). What is read:
//
//	security.protocol   PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
//	sasl.mechanism      PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
//	sasl.jaas.config    ...LoginModule required username="u" password="p";
//	sasl.username, sasl.password   the same credentials, without JAAS
//	ssl.truststore.location / ssl.truststore.certificates   PEM CAs
//	ssl.keystore.location / ssl.keystore.certificate.chain + ssl.keystore.key
//	                    PEM client certificate and key (mutual TLS)
//	ssl.endpoint.identification.algorithm   https (default) or empty
//	ssl.enabled.protocols, client.id
//	max.request.size    the producer's largest request, and so record batch
//	                    (default 1048576, Kafka's): produce's record limit
//
// The TLS settings go through internal/security, as the broker's own
// inter-broker client's do. Stores are PEM only: ssl.*.type defaults to
// PEM here (Kafka's JKS default would be refused).

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/security"
)

// clientListener names the settings' "listener" for internal/security
// (whose messages start "listener <name>: ", which is cut off here).
const clientListener = "cli"

// readCommandConfig reads a --command-config file ("" for none: no
// properties).
func readCommandConfig(path string) (map[string]string, error) {
	if path == "" {
		return map[string]string{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %v", err)
	}
	defer f.Close()
	props, err := config.ParseProperties(f)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %v", path, err)
	}
	return props, nil
}

// loadCommandConfig reads a --command-config file ("" for none) into kgo
// options: TLS, SASL and the producer's request size.
func loadCommandConfig(path string) ([]kgo.Opt, error) {
	if path == "" {
		return nil, nil
	}
	props, err := readCommandConfig(path)
	if err != nil {
		return nil, err
	}
	opts, err := clientOpts(props)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %v", path, err)
	}
	return opts, nil
}

// clientOpts maps client properties to kgo options.
func clientOpts(props map[string]string) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if id := strings.TrimSpace(props["client.id"]); id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	proto := strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	if proto == "" {
		proto = "PLAINTEXT"
	}
	var useTLS, useSASL bool
	switch proto {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("security.protocol=%s: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", props["security.protocol"])
	}
	if useTLS {
		cfg := config.Defaults()
		for k, v := range props {
			cfg.Props[k] = v
		}
		for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
			if _, ok := cfg.Props[k]; !ok {
				cfg.Props[k] = "PEM"
			}
		}
		tc, err := security.ClientTLS(cfg, clientListener)
		if err != nil {
			return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "listener "+clientListener+": "))
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if useSASL {
		m, err := saslMechanism(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	if _, ok := props["max.request.size"]; ok {
		_, mopts, err := maxRequestSize(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, mopts...)
	}
	return opts, nil
}

// defaultMaxRequestSize is Kafka's max.request.size default
// (ProducerConfig).
const defaultMaxRequestSize = 1048576

// defaultBrokerMaxWriteBytes is kgo's BrokerMaxWriteBytes default.
const defaultBrokerMaxWriteBytes = 100 << 20

// maxRequestSize reads max.request.size (Kafka's default if unset) and
// returns it with the kgo options that enforce it: the largest record
// batch (kgo.ProducerBatchMaxBytes, whose default 1000012 is below Kafka's
// 1048576) and, for a limit beyond kgo's 100 MiB default, the largest
// request written (kgo.BrokerMaxWriteBytes), which must hold a batch and
// the request's own fields.
func maxRequestSize(props map[string]string) (int32, []kgo.Opt, error) {
	n := int64(defaultMaxRequestSize)
	if v, ok := props["max.request.size"]; ok {
		var err error
		n, err = strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		// kgo's bounds on a record batch: 512 bytes to 1 GiB.
		if err != nil || n < 512 || n > 1<<30-1<<20 {
			return 0, nil, fmt.Errorf("max.request.size=%s: expected a number of bytes from 512 to %d", v, 1<<30-1<<20)
		}
	}
	opts := []kgo.Opt{kgo.ProducerBatchMaxBytes(int32(n))}
	if n+1<<20 > defaultBrokerMaxWriteBytes {
		opts = append(opts, kgo.BrokerMaxWriteBytes(int32(n+1<<20)))
	}
	return int32(n), opts, nil
}

// saslMechanism builds the client side of sasl.mechanism with the
// credentials of sasl.jaas.config (or sasl.username and sasl.password).
func saslMechanism(props map[string]string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	if mech == "" {
		mech = "GSSAPI" // Kafka's default
	}
	user, pass := props["sasl.username"], props["sasl.password"]
	if jaas := strings.TrimSpace(props["sasl.jaas.config"]); jaas != "" {
		opts, err := parseJAAS(jaas)
		if err != nil {
			return nil, fmt.Errorf("sasl.jaas.config: %v", err)
		}
		user, pass = opts["username"], opts["password"]
	}
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return nil, fmt.Errorf("sasl.mechanism=%s is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	if user == "" {
		return nil, fmt.Errorf("sasl.mechanism=%s needs a username: set sasl.jaas.config (username=\"...\" password=\"...\") or sasl.username and sasl.password", mech)
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
}

// jaasOption matches one option of a JAAS login module entry: key="value"
// (with \" and \\ escapes) or key=value.
var jaasOption = regexp.MustCompile(`([A-Za-z0-9_.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))`)

// parseJAAS reads the options of a one-module JAAS configuration
// (Kafka's sasl.jaas.config):
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="secret";
func parseJAAS(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return nil, fmt.Errorf("expected \"<LoginModule> required key=\\\"value\\\" ...;\"")
	}
	switch strings.TrimSuffix(fields[1], ";") {
	case "required", "requisite", "sufficient", "optional":
	default:
		return nil, fmt.Errorf("expected a control flag (required) after %s, got %q", fields[0], fields[1])
	}
	if !strings.HasSuffix(s, ";") {
		return nil, fmt.Errorf("missing the closing ';'")
	}
	rest := s[strings.Index(s, fields[1])+len(fields[1]):]
	out := map[string]string{}
	for _, m := range jaasOption.FindAllStringSubmatch(rest, -1) {
		v := m[3]
		if m[3] == "" {
			v = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
		}
		out[m[1]] = v
	}
	return out, nil
}
