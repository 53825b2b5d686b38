package objstore

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/config"
)

// FromConfig returns the object store a broker's configuration asks for:
// nil when remote.log.storage.system.enable is false, otherwise an S3
// store on sluice.remote.storage.* (docs/tiered-storage.md). It reads the
// CA and credentials files but does not reach the store: an error is a
// configuration error, and the caller refuses to start; an unreachable
// store, a missing bucket or refused credentials show in Check.
func FromConfig(cfg *config.Broker) (*S3, error) {
	if !cfg.Bool("remote.log.storage.system.enable", false) {
		return nil, nil
	}
	get := func(k string) string { return strings.TrimSpace(cfg.Props[k]) }
	if get("sluice.remote.storage.bucket") == "" {
		return nil, errors.New("sluice.remote.storage.bucket is required with remote.log.storage.system.enable=true")
	}
	o := S3Options{
		Endpoint:        get("sluice.remote.storage.endpoint"),
		Bucket:          get("sluice.remote.storage.bucket"),
		Prefix:          get("sluice.remote.storage.prefix"),
		Region:          get("sluice.remote.storage.region"),
		PathStyle:       strings.EqualFold(get("sluice.remote.storage.path.style.access.enable"), "true"),
		CredentialsFile: get("sluice.remote.storage.credentials.file"),
		CAFile:          get("sluice.remote.storage.tls.ca.file"),
	}
	if v := get("sluice.remote.storage.request.timeout.ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 32)
		if err != nil || ms < 1 {
			return nil, errors.New("sluice.remote.storage.request.timeout.ms: expected a positive int")
		}
		o.RequestTimeout = time.Duration(ms) * time.Millisecond
	}
	return NewS3(o)
}
