package config

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// remoteStorageDefs are tiered storage's settings besides Kafka 4.2's
// broker keys (remoteLogDefs): the metadata topic's, which Kafka takes
// with the rlmm.config. prefix (TopicBasedRemoteLogMetadataManagerConfig)
// and sluice also without it, and sluice's own object store settings,
// sluice.remote.storage.*, which stand for a RemoteStorageManager
// plugin's.
var remoteStorageDefs = func() []Def {
	topic := []Def{
		{Name: "remote.log.metadata.topic.num.partitions", Type: TypeInt, Default: "50", Min: 1, Max: math.MaxInt32, Doc: "Partitions of __remote_log_metadata, the topic the remote segments' metadata is kept in (KIP-405's topic-based metadata manager), fixed when the topic is created."},
		{Name: "remote.log.metadata.topic.replication.factor", Type: TypeShort, Default: "3", Min: 1, Max: math.MaxInt16, Doc: "Replication factor of __remote_log_metadata when it is created (at most the brokers registered then)."},
		{Name: "remote.log.metadata.topic.retention.ms", Type: TypeLong, Default: "-1", Min: -1, Max: math.MaxInt64, Doc: "retention.ms of __remote_log_metadata; -1 keeps every record (a segment's metadata must outlive the segment)."},
	}
	out := append([]Def(nil), topic...)
	for _, d := range topic {
		p := d
		p.Name = RemoteLogMetadataPrefix + d.Name
		p.Doc = "Kafka's name of " + d.Name + " (with remote.log.metadata.manager.impl.prefix); the unprefixed name wins."
		out = append(out, p)
	}
	return append(out, []Def{
		{Name: "sluice.remote.storage.endpoint", Type: TypeString, Default: "", Check: checkEndpoint, Form: "http(s)://host[:port]", Doc: "sluice only: URL of the S3-compatible object store tiered storage writes to (MinIO, SeaweedFS, Ceph RGW, ...); http:// is allowed. Empty: AWS S3 in sluice.remote.storage.region."},
		{Name: "sluice.remote.storage.bucket", Type: TypeString, Default: "", Check: checkBucket, Form: "an S3 bucket name", Doc: "sluice only: the bucket remote segments are kept in; it must exist (sluice does not create it). Required with remote.log.storage.system.enable=true. Every broker of a cluster names the same bucket and prefix."},
		{Name: "sluice.remote.storage.prefix", Type: TypeString, Default: "", Check: checkPrefix, Form: "path/ without a leading /", Doc: "sluice only: key prefix of every object (a / is added if missing), so that several clusters can share a bucket."},
		{Name: "sluice.remote.storage.region", Type: TypeString, Default: "us-east-1", Doc: "sluice only: the region requests are signed for; AWS S3 needs the bucket's, S3-compatible servers usually accept any."},
		{Name: "sluice.remote.storage.path.style.access.enable", Type: TypeBoolean, Default: "false", Doc: "sluice only: address the bucket in the URL's path (endpoint/bucket/key) rather than its host name (bucket.endpoint/key). Most S3-compatible servers (MinIO, SeaweedFS) need true; AWS S3 takes either."},
		{Name: "sluice.remote.storage.credentials.file", Type: TypeString, Default: "", Form: "/etc/sluice/s3-credentials", Doc: "sluice only: an AWS shared credentials file whose [default] profile has aws_access_key_id and aws_secret_access_key (and aws_session_token for temporary ones), read at start. Empty: the AWS SDK's default chain (the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables, ~/.aws/credentials with AWS_PROFILE, web identity, the EC2 or ECS role)."},
		{Name: "sluice.remote.storage.tls.ca.file", Type: TypeString, Default: "", Form: "/etc/sluice/s3-ca.pem", Doc: "sluice only: PEM CA certificates trusted for an https endpoint, besides the system's (a private CA's store)."},
		{Name: "sluice.remote.storage.request.timeout.ms", Type: TypeInt, Default: "30000", Min: 1, Max: math.MaxInt32, Doc: "sluice only: how long one attempt of a request to the object store may take to connect and to receive the answer's headers; a request is tried up to 5 times on 5xx answers, throttling, connection errors and timeouts, with jittered backoff up to 2 s."},
	}...)
}()

// RemoteLogMetadataPrefix is Kafka's default
// remote.log.metadata.manager.impl.prefix.
const RemoteLogMetadataPrefix = "rlmm.config."

// checkEndpoint accepts empty or an http(s) URL with a host and no query.
func checkEndpoint(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("expected http://host[:port] or https://host[:port]")
	}
	return nil
}

// s3Bucket is S3's rule for bucket names (general purpose buckets).
var s3Bucket = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// checkBucket accepts empty or a valid S3 bucket name.
func checkBucket(v string) error {
	if v == "" {
		return nil
	}
	if !s3Bucket.MatchString(v) || strings.Contains(v, "..") {
		return fmt.Errorf("expected an S3 bucket name: 3 to 63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit")
	}
	return nil
}

// checkPrefix refuses a key prefix that starts with a slash (S3 keys
// would then start with an empty path element).
func checkPrefix(v string) error {
	if strings.HasPrefix(v, "/") {
		return fmt.Errorf("expected a key prefix without a leading /")
	}
	return nil
}

// RemoteLogMetadataTopic returns the settings of __remote_log_metadata:
// remote.log.metadata.topic.* under either of their names (the unprefixed
// one first, then remote.log.metadata.manager.impl.prefix's), else
// Kafka's defaults (50 partitions, replication factor 3, retention -1).
func (b *Broker) RemoteLogMetadataTopic() (partitions int32, replicationFactor int16, retentionMs int64) {
	prefix := RemoteLogMetadataPrefix
	if v, ok := b.Props["remote.log.metadata.manager.impl.prefix"]; ok {
		prefix = strings.TrimSpace(v)
	}
	get := func(name string, def int64) int64 {
		for _, k := range []string{name, prefix + name} {
			if v, ok := b.Props[k]; ok {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					return n
				}
			}
		}
		return def
	}
	return int32(get("remote.log.metadata.topic.num.partitions", 50)),
		int16(get("remote.log.metadata.topic.replication.factor", 3)),
		get("remote.log.metadata.topic.retention.ms", -1)
}
