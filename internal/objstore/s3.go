package objstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// S3 defaults.
const (
	// DefaultRegion is the region signed for when none is configured
	// (S3-compatible stores accept any; AWS needs the bucket's).
	DefaultRegion = "us-east-1"
	// DefaultRequestTimeout bounds one attempt's connection and its wait
	// for the response headers.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultMaxAttempts is how many times one operation is tried.
	DefaultMaxAttempts = 5
	// DefaultMaxBackoff caps the jittered exponential backoff between
	// attempts.
	DefaultMaxBackoff = 2 * time.Second
	// spoolInMemory is the largest Put body of a reader that cannot seek
	// that is buffered in memory; a larger one is spooled to a temporary
	// file (a retried or signed request reads its body more than once).
	spoolInMemory = 8 << 20
)

// S3Options configure an S3 store. Only Bucket is required.
type S3Options struct {
	// Endpoint is the S3 service's URL, http:// or https:// (MinIO,
	// SeaweedFS, Ceph RGW, ...). Empty: AWS S3 in Region.
	Endpoint string
	// Bucket is the bucket every object goes in. It must exist.
	Bucket string
	// Prefix is prepended to every key ("tiered/" puts key a/b at
	// tiered/a/b); List takes and returns keys without it.
	Prefix string
	// Region is the region requests are signed for. Default DefaultRegion.
	Region string
	// PathStyle addresses the bucket in the path (endpoint/bucket/key)
	// rather than the host (bucket.endpoint/key), as most S3-compatible
	// servers need.
	PathStyle bool
	// AccessKeyID and SecretAccessKey, if set, are the credentials
	// (SessionToken optional). Otherwise CredentialsFile, otherwise the
	// AWS SDK's default chain: the AWS_ACCESS_KEY_ID /
	// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN environment variables,
	// ~/.aws/credentials (AWS_PROFILE), web identity, the instance role.
	AccessKeyID, SecretAccessKey, SessionToken string
	// CredentialsFile is an AWS shared credentials file whose [default]
	// profile holds aws_access_key_id, aws_secret_access_key and
	// optionally aws_session_token. Read once, by NewS3.
	CredentialsFile string
	// CAFile is a PEM file of CA certificates trusted for an https
	// endpoint, besides the system's.
	CAFile string
	// RequestTimeout bounds, for each attempt, connecting (TCP and TLS)
	// and waiting for the response headers once the request is sent.
	// The body of a Get is then read under the caller's context. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxAttempts is how many times an operation is tried on a
	// retryable error (5xx, throttling, connection errors, timeouts).
	// Default DefaultMaxAttempts.
	MaxAttempts int
	// MaxBackoff caps the backoff between attempts. Default
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
}

// S3 is a Store on an S3 bucket (AWS S3 or any S3-compatible server),
// through the AWS SDK for Go v2. Safe for concurrent use.
type S3 struct {
	c      *s3.Client
	bucket string
	prefix string
	where  string // endpoint or "AWS S3 (region)", for errors
}

// NewS3 builds an S3 store from o. It reads the CA and credentials files
// but does not reach the server: Check does.
func NewS3(o S3Options) (*S3, error) {
	if o.Bucket == "" {
		return nil, errors.New("objstore: S3 bucket not set")
	}
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	where := fmt.Sprintf("AWS S3 (%s)", o.Region)
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("objstore: S3 endpoint %q: want http://host[:port] or https://host[:port]", o.Endpoint)
		}
		where = o.Endpoint
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("objstore: S3 CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("objstore: S3 CA file %s: no PEM certificate in it", o.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	hc := awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = o.RequestTimeout }).
		WithTransportOptions(func(t *http.Transport) {
			t.TLSClientConfig = tlsCfg
			t.TLSHandshakeTimeout = o.RequestTimeout
			t.ResponseHeaderTimeout = o.RequestTimeout
			t.MaxIdleConnsPerHost = 64
		})
	load := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(o.Region),
		awsconfig.WithHTTPClient(hc),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = o.MaxAttempts
				so.MaxBackoff = o.MaxBackoff
				// A broker retries for as long as the store is down:
				// no client-side retry budget that would fail fast.
				so.RateLimiter = ratelimit.None
			})
		}),
		// Third-party S3 servers do not all accept the SDK's default
		// CRC trailers: checksums only where the API requires them.
		awsconfig.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		awsconfig.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	switch {
	case o.AccessKeyID != "" || o.SecretAccessKey != "":
		load = append(load, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, o.SessionToken)))
	case o.CredentialsFile != "":
		creds, err := readCredentialsFile(o.CredentialsFile)
		if err != nil {
			return nil, err
		}
		load = append(load, awsconfig.WithCredentialsProvider(creds))
	}
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), load...)
	if err != nil {
		return nil, fmt.Errorf("objstore: S3 client configuration: %w", err)
	}
	c := s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.UsePathStyle = o.PathStyle
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	prefix := o.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &S3{c: c, bucket: o.Bucket, prefix: prefix, where: where}, nil
}

// readCredentialsFile reads the [default] profile of an AWS shared
// credentials file.
func readCredentialsFile(path string) (aws.CredentialsProvider, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("objstore: S3 credentials file: %w", err)
	}
	sc, err := awsconfig.LoadSharedConfigProfile(context.Background(), "default", func(lo *awsconfig.LoadSharedConfigOptions) {
		lo.CredentialsFiles = []string{path}
		lo.ConfigFiles = []string{}
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: S3 credentials file %s: %w", path, err)
	}
	if !sc.Credentials.HasKeys() {
		return nil, fmt.Errorf("objstore: S3 credentials file %s: no aws_access_key_id and aws_secret_access_key in its [default] profile", path)
	}
	return credentials.StaticCredentialsProvider{Value: sc.Credentials}, nil
}

// String names the bucket and where it is.
func (s *S3) String() string {
	return fmt.Sprintf("s3://%s/%s at %s", s.bucket, s.prefix, s.where)
}

// Check reaches the bucket (HeadBucket): nil if it exists and the
// credentials may use it, otherwise an error saying which of these
// failed (unreachable, no such bucket, credentials refused).
func (s *S3) Check(ctx context.Context) error {
	_, err := s.c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	if err == nil {
		return nil
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			return fmt.Errorf("objstore: bucket %q does not exist at %s", s.bucket, s.where)
		case http.StatusForbidden, http.StatusUnauthorized:
			return fmt.Errorf("objstore: %s refused the credentials for bucket %q (HTTP %d): check the access key and secret", s.where, s.bucket, re.HTTPStatusCode())
		case http.StatusMovedPermanently:
			return fmt.Errorf("objstore: bucket %q is in another region than %q (HTTP 301)", s.bucket, s.regionOf())
		}
		return fmt.Errorf("objstore: bucket %q at %s: HTTP %d: %w", s.bucket, s.where, re.HTTPStatusCode(), err)
	}
	return fmt.Errorf("objstore: %s unreachable: %w", s.where, err)
}

func (s *S3) regionOf() string { return s.c.Options().Region }

func (s *S3) key(k string) string { return s.prefix + k }

// Put implements Store. A body that is an io.ReadSeeker and io.ReaderAt
// (an *os.File, an io.SectionReader) is sent from where it stands; any
// other is buffered first (in memory up to 8 MiB, else in a temporary
// file), since a signed or retried request reads its body again.
func (s *S3) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	rs, cleanup, err := seekable(body, size)
	if err != nil {
		return err
	}
	defer cleanup()
	_, err = s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.key(key)),
		Body:          rs,
		ContentLength: aws.Int64(size),
	})
	if err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	return nil
}

// seekable returns exactly size bytes of body as a ReadSeeker.
func seekable(body io.Reader, size int64) (io.ReadSeeker, func(), error) {
	if ra, ok := body.(io.ReaderAt); ok {
		if sk, ok := body.(io.Seeker); ok {
			cur, err := sk.Seek(0, io.SeekCurrent)
			if err == nil {
				end, err := sk.Seek(0, io.SeekEnd)
				if err != nil {
					return nil, nil, err
				}
				if _, err := sk.Seek(cur, io.SeekStart); err != nil {
					return nil, nil, err
				}
				if end-cur < size {
					return nil, nil, io.ErrUnexpectedEOF
				}
				return io.NewSectionReader(ra, cur, size), func() {}, nil
			}
		}
	}
	if size <= spoolInMemory {
		b := make([]byte, size)
		if _, err := io.ReadFull(body, b); err != nil {
			return nil, nil, shortBody(err)
		}
		return bytes.NewReader(b), func() {}, nil
	}
	f, err := os.CreateTemp("", "sluice-objstore-*")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	n, err := io.Copy(f, io.LimitReader(body, size))
	if err == nil && n < size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		cleanup()
		return nil, nil, shortBody(err)
	}
	return io.NewSectionReader(f, 0, size), cleanup, nil
}

func shortBody(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	off = max(off, 0)
	if n == 0 {
		_, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.key(key))})
		if err != nil {
			return nil, s.mapErr("get", key, err)
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.key(key))}
	switch {
	case n > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	case off > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
	}
	out, err := s.c.GetObject(ctx, in)
	if err != nil {
		if isAPIError(err, "InvalidRange") {
			// The range starts at or past the end: cut short there, as
			// the interface says. The object must still exist.
			if _, herr := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.key(key))}); herr != nil {
				return nil, s.mapErr("get", key, herr)
			}
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, s.mapErr("get", key, err)
	}
	return out.Body, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.key(key))})
	if err != nil {
		if err := s.mapErr("delete", key, err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	return nil
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string) ([]string, error) {
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.key(prefix)),
	})
	var keys []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("objstore: list %s: %w", prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), s.prefix))
		}
	}
	return keys, nil
}

// mapErr turns S3's "no such key" (and a 404 HeadObject, which has no
// error code) into ErrNotFound.
func (s *S3) mapErr(op, key string, err error) error {
	if isAPIError(err, "NoSuchKey", "NotFound") {
		return fmt.Errorf("objstore: %s %s: %w", op, key, ErrNotFound)
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound && !isAPIError(err, "NoSuchBucket") {
		return fmt.Errorf("objstore: %s %s: %w", op, key, ErrNotFound)
	}
	return fmt.Errorf("objstore: %s %s: %w", op, key, err)
}

func isAPIError(err error, codes ...string) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, c := range codes {
		if ae.ErrorCode() == c {
			return true
		}
	}
	return false
}
