package testproc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/objstore"
)

// S3 test server defaults: the bucket StartS3 creates and the
// credentials it accepts.
const (
	S3Bucket    = "sluice-test"
	S3AccessKey = "sluice-test-key"
	S3SecretKey = "sluice-test-secret"
)

var (
	s3BuildOnce sync.Once
	s3BuildPath string
	s3BuildErr  error
)

// BuildS3Server compiles ./internal/testproc/s3server (gofakes3 with an
// in-memory backend) once per process, next to the sluice binary
// BuildBinary makes, and returns its path. SLUICE_S3SERVER_BIN, if set, is
// the path instead.
func BuildS3Server() (string, error) {
	s3BuildOnce.Do(func() {
		if p := os.Getenv("SLUICE_S3SERVER_BIN"); p != "" {
			s3BuildPath, s3BuildErr = filepath.Abs(p)
			return
		}
		root, err := ModuleRoot()
		if err != nil {
			s3BuildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sluice-s3server-")
		if err != nil {
			s3BuildErr = err
			return
		}
		out := filepath.Join(dir, "s3server")
		cmd := exec.Command(goTool(), "build", "-o", out, "./internal/testproc/s3server")
		cmd.Dir = root
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			s3BuildErr = fmt.Errorf("go build ./internal/testproc/s3server: %v\n%s", err, buf.String())
			return
		}
		s3BuildPath = out
	})
	return s3BuildPath, s3BuildErr
}

// S3Server is a running S3-compatible test server (s3server) with one
// bucket.
type S3Server struct {
	// Endpoint is its URL, http://127.0.0.1:PORT.
	Endpoint string
	// Bucket exists from the start.
	Bucket string
	// AccessKey and SecretKey are the credentials it accepts.
	AccessKey, SecretKey string
	// CredentialsFile holds them as an AWS shared credentials file.
	CredentialsFile string

	cmd  *exec.Cmd
	done chan struct{}
}

// StartS3Server starts s3server on addr (127.0.0.1:0 for a free port)
// with the bucket S3Bucket and the credentials S3AccessKey/S3SecretKey,
// writing its credentials file and log in dir. It returns once the
// server listens; Stop ends it.
func StartS3Server(dir, addr string) (*S3Server, error) {
	bin, err := BuildS3Server()
	if err != nil {
		return nil, err
	}
	s := &S3Server{Bucket: S3Bucket, AccessKey: S3AccessKey, SecretKey: S3SecretKey,
		CredentialsFile: filepath.Join(dir, "s3-credentials"), done: make(chan struct{})}
	creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s.AccessKey, s.SecretKey)
	if err := os.WriteFile(s.CredentialsFile, []byte(creds), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "s3server.log"))
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "-addr", addr, "-bucket", s.Bucket, "-access-key", s.AccessKey, "-secret-key", s.SecretKey)
	s.cmd.Stderr = logf
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		s.cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if ep, ok := strings.CutPrefix(sc.Text(), "s3server listening on "); ok {
				ready <- ep
			}
		}
	}()
	select {
	case s.Endpoint = <-ready:
	case <-s.done:
		return nil, fmt.Errorf("s3server exited at start (log: %s)", logf.Name())
	case <-time.After(30 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("s3server did not listen within 30s")
	}
	// The bucket answers before the server is handed out.
	st, err := objstore.NewS3(s.Options())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = st.Check(ctx)
		cancel()
	}
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("s3server: %w", err)
	}
	return s, nil
}

// StartS3 starts an S3 test server for t (StartS3Server on a free port,
// its files in a temporary directory) and stops it when t ends.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	s, err := StartS3Server(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testproc: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Stop kills the server and waits for it to exit; its objects are lost.
func (s *S3Server) Stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
	<-s.done
}

// Options are objstore options that reach the server's bucket.
func (s *S3Server) Options() objstore.S3Options {
	return objstore.S3Options{Endpoint: s.Endpoint, Bucket: s.Bucket, PathStyle: true,
		AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey, RequestTimeout: 5 * time.Second}
}

// BrokerProps are the broker settings that turn tiered storage on with
// this server as the object store (its credentials through
// CredentialsFile), for server.properties or Options.ExtraArgs' --config.
// endpoint overrides the server's own (a proxy in front of it); "" keeps
// it.
func (s *S3Server) BrokerProps(endpoint string) map[string]string {
	if endpoint == "" {
		endpoint = s.Endpoint
	}
	return map[string]string{
		"remote.log.storage.system.enable":               "true",
		"sluice.remote.storage.endpoint":                 endpoint,
		"sluice.remote.storage.bucket":                   s.Bucket,
		"sluice.remote.storage.path.style.access.enable": "true",
		"sluice.remote.storage.credentials.file":         s.CredentialsFile,
		"sluice.remote.storage.request.timeout.ms":       "5000",
	}
}
