package chaos

import (
	"fmt"
	"sort"

	"github.com/sluice-io/sluice/internal/testproc"
)

// tieredTopicConfigs are the test topic's settings in a tiered run: small
// segments that roll within seconds at the workload's rate, uploaded as
// soon as they are rolled and then deleted locally (local retention of
// one segment), so that the final read and the consumers that fall behind
// read from the object store.
var tieredTopicConfigs = map[string]string{
	"remote.storage.enable": "true",
	"segment.bytes":         "65536",
	"local.retention.bytes": "65536",
}

// tieredBrokerProps are the brokers' settings in a tiered run besides the
// object store's: the remote log manager looks for work every second.
var tieredBrokerProps = []string{
	"remote.log.manager.task.interval.ms=1000",
}

// startObjectStore starts the S3 test server (its log and credentials file
// in dir) and the proxy in front of it, and returns the broker settings
// that point at the proxy.
func (c *cluster) startObjectStore(dir string) ([]string, error) {
	s, err := testproc.StartS3Server(dir, "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("starting the S3 test server: %w", err)
	}
	c.s3 = s
	p, err := newS3Proxy(s.Endpoint)
	if err != nil {
		return nil, err
	}
	c.s3p = p
	c.logf("object store: S3 test server %s behind the proxy %s, bucket %s", s.Endpoint, p.endpoint(), s.Bucket)
	props := s.BrokerProps(p.endpoint())
	var out []string
	for k, v := range props {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return append(out, tieredBrokerProps...), nil
}
