// Package testcerts is a test helper: a throwaway certificate authority
// issuing ECDSA server and client certificates, written as PEM files for
// sluice's ssl.keystore.location / ssl.truststore.location (docs/security.md
// does the same with openssl).
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for one test.
type CA struct {
	t    testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate in PEM (a trust store).
	File string
	// Pool trusts the CA.
	Pool *x509.CertPool
}

// NewCA makes a CA whose files live in a temporary directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key, Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.File = ca.write(name+"-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Issued is a certificate and key signed by the CA.
type Issued struct {
	// File holds the PKCS#8 key then the certificate and the CA's, in PEM
	// (an ssl.keystore.location).
	File string
	// CertPEM and KeyPEM are the chain and the key alone.
	CertPEM, KeyPEM []byte
	// Cert is the pair for a Go TLS client or server.
	Cert tls.Certificate
}

// Server issues a certificate for localhost and 127.0.0.1.
func (ca *CA) Server(name string) *Issued {
	return ca.issue(name, pkix.Name{CommonName: name}, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

// Client issues a client certificate with the given subject.
func (ca *CA) Client(name string, subject pkix.Name) *Issued {
	return ca.issue(name, subject, nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
}

var serial int64 = 100

func (ca *CA) issue(name string, subject pkix.Name, dns []string, ips []net.IP, usage []x509.ExtKeyUsage) *Issued {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: subject, DNSNames: dns, IPAddresses: ips,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issued{
		CertPEM: append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})...),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}),
	}
	if is.Cert, err = tls.X509KeyPair(is.CertPEM, is.KeyPEM); err != nil {
		t.Fatal(err)
	}
	is.File = ca.write(name+".pem", append(append([]byte(nil), is.KeyPEM...), is.CertPEM...))
	return is
}

func (ca *CA) write(name string, b []byte) string {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}
