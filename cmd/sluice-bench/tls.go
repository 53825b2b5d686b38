package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
)

// clientTLS is the TLS configuration of --tls-ca (nil: plaintext), and
// dialOpts the client options every client of the run takes.
var (
	clientTLS *tls.Config
	dialOpts  []kgo.Opt
)

// tlsConfig trusts the PEM certificates of caFile (TLS 1.2 at least, as
// the broker requires).
func tlsConfig(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
