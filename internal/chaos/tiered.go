package chaos

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/testproc"
)

// tieredTopicConfigs are the test topic's settings in a tiered run: small
// segments that roll every few seconds at the workload's rate (a
// partition gets about 5 KiB/s at the default --rate), copied as soon as
// they are rolled and then deleted locally (a local retention of one byte
// keeps only the active segment and those not yet copied), so that the
// object store sees copies all through the run; the final read and every
// new consumer session, which start at the log start, read from the
// remote log; and a follower that was killed, paused or cut off for a few
// seconds comes back below its leader's local log start and rebuilds from
// the remote log (KIP-405's OFFSET_MOVED_TO_TIERED_STORAGE path).
var tieredTopicConfigs = map[string]string{
	"remote.storage.enable": "true",
	"segment.bytes":         "32768",
	"local.retention.bytes": "1",
}

// tieredBrokerProps are the brokers' settings in a tiered run besides the
// object store's: the remote log manager looks for work twice a second.
var tieredBrokerProps = []string{
	"remote.log.manager.task.interval.ms=500",
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

// TieredState is where the test topic's partitions stand across the two
// tiers at the end of a tiered run (results.json "tiered"): whether the
// run really moved data to the object store and read it back from there.
type TieredState struct {
	// LogStart is each partition's log start (ListOffsets -2), the offset
	// the final read starts at.
	LogStart map[int32]int64 `json:"logStart"`
	// LocalStart is each partition's local log start on its leader
	// (ListOffsets -4, KIP-405's EARLIEST_LOCAL_TIMESTAMP).
	LocalStart map[int32]int64 `json:"localStart"`
	// TieredEnd is each partition's highest offset in the remote log
	// (ListOffsets -5, KIP-1005's LATEST_TIERED_TIMESTAMP; -1 for none).
	TieredEnd map[int32]int64 `json:"tieredEnd"`
	// RemoteSegments counts each partition's segments in the object
	// store (the .log objects under the partition's prefix).
	RemoteSegments map[int32]int `json:"remoteSegments"`
	// ReadFromRemote lists the partitions whose final read started below
	// the local log start, i.e. went through the remote log.
	ReadFromRemote []int32 `json:"readFromRemote"`
	Err            string  `json:"err,omitempty"`
}

// tieredState lists the test topic's offsets in both tiers and counts its
// remote segments straight from the S3 test server (not through the
// proxy, so that a fault still in place cannot hide them).
func (c *cluster) tieredState(ctx context.Context, adm *kadm.Client, topic string) *TieredState {
	ts := &TieredState{LogStart: map[int32]int64{}, LocalStart: map[int32]int64{},
		TieredEnd: map[int32]int64{}, RemoteSegments: map[int32]int{}}
	var errs []string
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, q := range []struct {
		list func(context.Context, ...string) (kadm.ListedOffsets, error)
		into map[int32]int64
	}{
		{adm.ListStartOffsets, ts.LogStart},
		{adm.ListLocalLogStartOffsets, ts.LocalStart},
		{adm.ListLatestRemoteOffsets, ts.TieredEnd},
	} {
		l, err := q.list(lctx, topic)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		l.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				errs = append(errs, fmt.Sprintf("p%d: %v", o.Partition, o.Err))
				return
			}
			q.into[o.Partition] = o.Offset
		})
	}
	for p, local := range ts.LocalStart {
		if start, ok := ts.LogStart[p]; ok && start < local {
			ts.ReadFromRemote = append(ts.ReadFromRemote, p)
		}
	}
	slices.Sort(ts.ReadFromRemote)
	if c.s3 != nil {
		st, err := objstore.NewS3(c.s3.Options())
		if err == nil {
			var keys []string
			// remote.ObjectKey: {topic}-{topic id}/{partition}/{start}-{id}.log
			if keys, err = st.List(lctx, topic+"-"); err == nil {
				for _, k := range keys {
					parts := strings.Split(k, "/")
					if len(parts) != 3 || !strings.HasSuffix(k, ".log") {
						continue
					}
					if p, perr := strconv.ParseInt(parts[1], 10, 32); perr == nil {
						ts.RemoteSegments[int32(p)]++
					}
				}
			}
		}
		if err != nil {
			errs = append(errs, "listing the object store: "+err.Error())
		}
	}
	if len(errs) > 0 {
		ts.Err = strings.Join(errs, "; ")
	}
	return ts
}

// summary is one line for the harness's log.
func (ts *TieredState) summary() string {
	var b strings.Builder
	segs := 0
	var ps []int32
	for p := range ts.LogStart {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		segs += ts.RemoteSegments[p]
		fmt.Fprintf(&b, " p%d[start %d, local start %d, tiered end %d, %d remote segments]",
			p, ts.LogStart[p], ts.LocalStart[p], ts.TieredEnd[p], ts.RemoteSegments[p])
	}
	return fmt.Sprintf("tiered: %d remote segments, %d of %d partitions read from the remote log:%s",
		segs, len(ts.ReadFromRemote), len(ps), b.String())
}
