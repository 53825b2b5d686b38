package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sluice-io/sluice/internal/config"
)

// reloadInterval bounds how often the store files are looked at: at most
// once per interval, on a new connection.
const reloadInterval = time.Second

// stamp identifies a version of a file by its modification time and size.
type stamp struct {
	mod  time.Time
	size int64
	ok   bool // the file could be stat'ed
}

func statFile(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	return stamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
}

// stores is a listener's key and trust stores read from files
// (ssl.keystore.location, ssl.truststore.location) and re-read when a
// file changes. Kafka replaces them through a dynamic listener config
// update (KIP-226, AlterConfigs of listener.name.<l>.ssl.keystore.location);
// sluice has no dynamic broker configs and looks at the files instead: on
// a new connection, at most once per reloadInterval, a file whose
// modification time or size changed is read again. A file that does not
// parse (or is missing) leaves the previous store in use and is logged
// once per change. Inline stores (ssl.keystore.certificate.chain,
// ssl.keystore.key, ssl.truststore.certificates) never change.
type stores struct {
	cfg                 *config.Broker
	listener            string
	keyFile, trustFile  string // "" when inline or absent
	now                 func() time.Time
	mu                  sync.Mutex
	checked             time.Time
	keyStamp, trustStmp stamp // of the versions in use
	keyBad, trustBad    stamp // the last versions warned about
	cert                *tls.Certificate
	pool                *x509.CertPool
	server              *tls.Config // built from base for cert and pool
	serverOf            [2]any      // the cert and pool server was built for
}

// loadStores reads the listener's stores for the first time: an error
// here stops the node, as before reloading existed.
func loadStores(cfg *config.Broker, listener string) (*stores, error) {
	s := &stores{cfg: cfg, listener: listener, now: time.Now}
	if cfg.Setting(listener, "ssl.keystore.location") != "" {
		s.keyFile = cfg.Setting(listener, "ssl.keystore.location")
		s.keyStamp = statFile(s.keyFile)
	}
	if cfg.Setting(listener, "ssl.truststore.location") != "" {
		s.trustFile = cfg.Setting(listener, "ssl.truststore.location")
		s.trustStmp = statFile(s.trustFile)
	}
	var err error
	if s.cert, err = keyStore(cfg, listener); err != nil {
		return nil, err
	}
	if s.pool, err = trustStore(cfg, listener); err != nil {
		return nil, err
	}
	s.checked = s.now()
	return s, nil
}

// reloads reports whether any store comes from a file.
func (s *stores) reloads() bool { return s.keyFile != "" || s.trustFile != "" }

// current returns the stores in use, first re-reading changed files if
// reloadInterval has passed since the last look.
func (s *stores) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
	return s.cert, s.pool
}

func (s *stores) refreshLocked() {
	now := s.now()
	if now.Sub(s.checked) < reloadInterval && !now.Before(s.checked) {
		return
	}
	s.checked = now
	if s.keyFile != "" {
		if st := statFile(s.keyFile); st != s.keyStamp {
			cert, err := keyStore(s.cfg, s.listener)
			if err == nil && cert == nil {
				err = errors.New("no key store")
			}
			if err != nil {
				s.warnOnce(&s.keyBad, st, "ssl.keystore.location", s.keyFile, err)
			} else {
				s.cert, s.keyStamp = cert, st
				attrs := []any{"listener", s.listener, "file", s.keyFile}
				if cert.Leaf != nil {
					attrs = append(attrs, "subject", SubjectDN(cert.Leaf), "serial", cert.Leaf.SerialNumber.String())
				}
				slog.Default().Info("TLS key store reloaded", attrs...)
			}
		}
	}
	if s.trustFile != "" {
		if st := statFile(s.trustFile); st != s.trustStmp {
			pool, err := trustStore(s.cfg, s.listener)
			if err != nil {
				s.warnOnce(&s.trustBad, st, "ssl.truststore.location", s.trustFile, err)
			} else {
				s.pool, s.trustStmp = pool, st
				slog.Default().Info("TLS trust store reloaded", "listener", s.listener, "file", s.trustFile)
			}
		}
	}
}

// warnOnce logs that a changed store file could not be used, once per
// version of the file.
func (s *stores) warnOnce(last *stamp, st stamp, key, file string, err error) {
	if *last == st {
		return
	}
	*last = st
	slog.Default().Warn("TLS store changed but cannot be used; keeping the previous one", "listener", s.listener, "key", key, "file", file, "err", err)
}

// serverConfig returns base with the stores in use, the same
// configuration for as long as they do not change.
func (s *stores) serverConfig(base *tls.Config) *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
	if s.server != nil && s.serverOf == [2]any{s.cert, s.pool} {
		return s.server
	}
	c := base.Clone()
	c.Certificates = []tls.Certificate{*s.cert}
	c.ClientCAs = s.pool
	s.server, s.serverOf = c, [2]any{s.cert, s.pool}
	return c
}
