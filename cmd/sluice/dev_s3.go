package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	bolt "go.etcd.io/bbolt"
)

// `sluice dev --s3`: tiered storage (docs/tiered-storage.md) with one
// command. dev serves an S3-compatible object store itself, gofakes3
// (github.com/johannesboyne/gofakes3, the server sluice's tests use) with
// its bbolt backend, so the objects are kept in a file in the data
// directory (s3/objects.db) and survive a restart of dev as the brokers'
// logs do. The brokers' sluice.remote.storage.* point at it, with the
// bucket devS3Bucket and the keys in s3/credentials. It is for trying
// tiered storage on one machine, not for keeping data: a real cluster
// names AWS S3 or a MinIO (or other S3-compatible) server instead (README,
// "Tiered storage").

// devS3Bucket is the bucket `sluice dev --s3` creates and the brokers use.
const devS3Bucket = "sluice-dev"

// devS3Key is the access key (and secret key) of dev's S3 server.
const devS3Key = "sluice-dev"

// devS3 is dev's S3-compatible server.
type devS3 struct {
	// Endpoint is its URL (http://127.0.0.1:PORT).
	Endpoint string
	// CredentialsFile is an AWS credentials file with its keys.
	CredentialsFile string
	srv             *http.Server
	db              *bolt.DB
	done            chan struct{}
}

// startDevS3 serves an S3-compatible store on 127.0.0.1:port with its
// objects in dataDir/s3/objects.db and the bucket devS3Bucket (created
// unless it exists).
func startDevS3(dataDir string, port int) (*devS3, error) {
	dir := filepath.Join(dataDir, "s3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// A second dev on the same data directory finds the file locked.
	bdb, err := bolt.Open(filepath.Join(dir, "objects.db"), 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("dev S3 server: %s: %w", filepath.Join(dir, "objects.db"), err)
	}
	db := s3bolt.New(bdb)
	ok, err := db.BucketExists(devS3Bucket)
	if err == nil && !ok {
		err = db.CreateBucket(devS3Bucket)
	}
	if err != nil {
		bdb.Close()
		return nil, fmt.Errorf("dev S3 server: bucket %s: %w", devS3Bucket, err)
	}
	creds := filepath.Join(dir, "credentials")
	text := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", devS3Key, devS3Key)
	if err := os.WriteFile(creds, []byte(text), 0o600); err != nil {
		bdb.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		bdb.Close()
		return nil, fmt.Errorf("dev S3 server: %w", err)
	}
	faker := gofakes3.New(db, gofakes3.WithAutoBucket(false), gofakes3.WithoutVersioning())
	s := &devS3{Endpoint: "http://" + ln.Addr().String(), CredentialsFile: creds, db: bdb, done: make(chan struct{}),
		srv: &http.Server{Handler: faker.Server(), ReadHeaderTimeout: 30 * time.Second}}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "sluice dev: S3 server: %v\n", err)
		}
	}()
	return s, nil
}

// properties are the broker settings that turn tiered storage on with
// this server.
func (s *devS3) properties() string {
	return fmt.Sprintf(`remote.log.storage.system.enable=true
sluice.remote.storage.endpoint=%s
sluice.remote.storage.bucket=%s
sluice.remote.storage.path.style.access.enable=true
sluice.remote.storage.credentials.file=%s
`, s.Endpoint, devS3Bucket, s.CredentialsFile)
}

// close stops the server and closes its file.
func (s *devS3) close() {
	s.srv.Close()
	<-s.done
	s.db.Close()
}
