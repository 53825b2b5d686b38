package status

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// HealthPaths are the paths served without credentials whatever the
// Auth: liveness and readiness probes carry no data.
var HealthPaths = []string{"/healthz", "/readyz"}

// Auth is the access policy of the --http port (docs/security.md). A
// request for a health path is always served; any other is served when
// the policy lets it through, else answered 401 with a WWW-Authenticate
// challenge (RFC 6750).
type Auth struct {
	// Tokens returns the accepted bearer tokens
	// (sluice.http.auth.bearer.token and the lines of
	// sluice.http.auth.bearer.token.file); nil or empty: no token is
	// asked for.
	Tokens func() [][]byte
	// CertAccepted: a client certificate verified by the TLS handshake
	// (ssl.client.auth=requested or required of the HTTP listener) is a
	// credential by itself.
	CertAccepted bool
	// CertRequired (ssl.client.auth=required): every request but the
	// health checks needs a verified client certificate; a token alone is
	// not enough. The handshake itself only requests the certificate, so
	// that probes without one still reach the health paths.
	CertRequired bool
}

// open reports whether the policy asks for no credential at all.
func (a Auth) open(tokens [][]byte) bool {
	return !a.CertRequired && len(tokens) == 0
}

// allowed reports whether r carries the credentials the policy asks for.
func (a Auth) allowed(r *http.Request) bool {
	certOK := r.TLS != nil && len(r.TLS.VerifiedChains) > 0
	if a.CertRequired {
		return certOK
	}
	var tokens [][]byte
	if a.Tokens != nil {
		tokens = a.Tokens()
	}
	if a.open(tokens) {
		return true
	}
	if a.CertAccepted && certOK {
		return true
	}
	given, ok := bearer(r)
	if !ok {
		return false
	}
	match := 0
	for _, t := range tokens {
		// Constant time in the token's content; every token is compared.
		match |= subtle.ConstantTimeCompare(given, t)
	}
	return match == 1
}

// bearer extracts the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) ([]byte, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return nil, false
	}
	return []byte(tok), true
}

// Protect wraps h with the policy: health paths pass through, every other
// request needs the policy's credentials.
func (a Auth) Protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range HealthPaths {
			if r.URL.Path == p {
				h.ServeHTTP(w, r)
				return
			}
		}
		if !a.allowed(r) {
			if a.CertRequired {
				http.Error(w, "a client certificate is required", http.StatusUnauthorized)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// StaticTokens returns a Tokens function answering the given tokens
// (empty ones dropped).
func StaticTokens(tokens ...string) func() [][]byte {
	var out [][]byte
	for _, t := range tokens {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, []byte(t))
		}
	}
	return func() [][]byte { return out }
}

// TokenFile is a bearer token file (sluice.http.auth.bearer.token.file):
// one token per line, blank lines and lines starting with # ignored. It
// is read at start and again when its modification time or size changes,
// checked at most once a second, so tokens can be rotated without a
// restart; a file that becomes unreadable or empty keeps the last tokens
// read.
type TokenFile struct {
	path string
	// extra are tokens accepted besides the file's
	// (sluice.http.auth.bearer.token).
	extra [][]byte

	mu      sync.Mutex
	checked time.Time
	mod     time.Time
	size    int64
	tokens  [][]byte
}

// OpenTokenFile reads path; extra are tokens accepted besides the file's.
// An unreadable file, or one holding no token, is an error.
func OpenTokenFile(path string, extra ...string) (*TokenFile, error) {
	f := &TokenFile{path: path, extra: StaticTokens(extra...)()}
	if err := f.reload(time.Now()); err != nil {
		return nil, err
	}
	return f, nil
}

// Tokens returns the accepted tokens, re-reading the file if it changed.
func (f *TokenFile) Tokens() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := time.Now(); now.Sub(f.checked) >= time.Second {
		f.reload(now) // on error, keep the last tokens
	}
	return f.tokens
}

// reload re-reads the file if it changed since the last read. Call with
// f.mu held (or before f is shared).
func (f *TokenFile) reload(now time.Time) error {
	f.checked = now
	st, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	if f.tokens != nil && st.ModTime().Equal(f.mod) && st.Size() == f.size {
		return nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	tokens := append([][]byte{}, f.extra...)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tokens = append(tokens, []byte(line))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	if len(tokens) == len(f.extra) {
		// An emptied file (a rotation caught half way) must not open
		// the port: keep the last tokens.
		return fmt.Errorf("%s: no bearer token in the file", f.path)
	}
	f.tokens, f.mod, f.size = tokens, st.ModTime(), st.Size()
	return nil
}
