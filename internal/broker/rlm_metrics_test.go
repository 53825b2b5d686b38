package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/metrics"
	"github.com/sluice-io/sluice/internal/remote"
)

// deleteFailStore is a faultyStore whose Deletes fail while failDelete is
// set.
type deleteFailStore struct {
	faultyStore
	failDelete chan struct{} // closed: Deletes succeed again
}

func (d *deleteFailStore) Delete(ctx context.Context, key string) error {
	select {
	case <-d.failDelete:
		return d.faultyStore.Delete(ctx, key)
	default:
		return errStoreDown
	}
}

// gauge returns the value of the sluice metric name with the label topic
// (topic "" for a metric without labels), and whether it is exposed.
func gauge(t *testing.T, name, topic string) (float64, bool) {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			lt := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "topic" {
					lt = l.GetValue()
				}
			}
			if lt != topic {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestTieredMetrics: the tiered storage metrics of Kafka's
// RemoteStorageMetrics, per topic, on the Prometheus registry: copies
// (requests, bytes), the remote log's size and metadata count, the
// copy lag, and, while the store refuses deletions, the delete lag and
// errors (RemoteDeleteLagBytes/Segments, RemoteDeleteErrorsPerSec), back
// to 0 once deletions work; and the reader pool's queue and idle ratio.
func TestTieredMetrics(t *testing.T) {
	const topic = "tiered-metrics"
	store := &deleteFailStore{failDelete: make(chan struct{})}
	q := newFakeQuorum()
	m := startTiered(t, q, 1, t.TempDir(), store, tieredProps())
	if err := m.b.CreateTopic(topic, 1, 1, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
	}, false); err != nil {
		t.Fatal(err)
	}
	produceN(t, []string{m.addr}, topic, 300, 100)
	rp := remoteOf(t, m.b, topic, 0)
	waitFor(t, "copies, and the gauges of the pass after", 20*time.Second, func() bool {
		segs := m.b.RemoteMetadata().Segments(rp)
		var size int64
		for _, s := range segs {
			size += s.SizeBytes
		}
		got, _ := gauge(t, "sluice_remote_log_size_bytes", topic)
		n, _ := gauge(t, "sluice_remote_log_metadata_count", topic)
		return len(segs) >= 5 && got == float64(size) && n == float64(len(m.b.RemoteMetadata().(*remote.Cache).All(rp)))
	})
	segs := m.b.RemoteMetadata().Segments(rp)
	if n := testutil.ToFloat64(metrics.RemoteCopyRequests.WithLabelValues(topic)); n < float64(len(segs)) {
		t.Fatalf("sluice_remote_copy_requests_total %v, %d segments copied", n, len(segs))
	}
	var copied int64
	for _, s := range segs {
		copied += s.SizeBytes
	}
	if n := testutil.ToFloat64(metrics.RemoteCopyBytes.WithLabelValues(topic)); n < float64(copied) {
		t.Fatalf("sluice_remote_copy_bytes_total %v, %d bytes copied", n, copied)
	}
	for _, name := range []string{"sluice_remote_copy_lag_bytes", "sluice_remote_copy_lag_segments", "sluice_remote_delete_lag_bytes", "sluice_remote_delete_lag_segments"} {
		if _, ok := gauge(t, name, topic); !ok {
			t.Fatalf("%s{topic=%q} not exposed", name, topic)
		}
	}
	if v, ok := gauge(t, "sluice_remote_log_reader_task_queue_size", ""); !ok || v != 0 {
		t.Fatalf("sluice_remote_log_reader_task_queue_size %v (exposed %v)", v, ok)
	}
	if v, ok := gauge(t, "sluice_remote_log_reader_avg_idle_ratio", ""); !ok || v != 1 {
		t.Fatalf("sluice_remote_log_reader_avg_idle_ratio %v (exposed %v), no read running", v, ok)
	}

	// Deletions refused: retention.bytes expires remote segments that
	// cannot go, the delete lag shows them.
	delErrs := testutil.ToFloat64(metrics.RemoteDeleteErrors.WithLabelValues(topic))
	if err := m.b.AlterTopicConfigs(topic, []metadata.ConfigOp{{Name: "retention.bytes", Value: "4096"}}, false, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a delete lag", 20*time.Second, func() bool {
		b, _ := gauge(t, "sluice_remote_delete_lag_bytes", topic)
		s, _ := gauge(t, "sluice_remote_delete_lag_segments", topic)
		return b > 0 && s > 0 && testutil.ToFloat64(metrics.RemoteDeleteErrors.WithLabelValues(topic)) > delErrs
	})
	close(store.failDelete)
	waitFor(t, "the delete lag back to 0", 20*time.Second, func() bool {
		b, _ := gauge(t, "sluice_remote_delete_lag_bytes", topic)
		s, _ := gauge(t, "sluice_remote_delete_lag_segments", topic)
		return b == 0 && s == 0 && len(m.b.RemoteMetadata().Segments(rp)) < len(segs)
	})
	if n := testutil.ToFloat64(metrics.RemoteDeleteRequests.WithLabelValues(topic)); n == 0 {
		t.Fatal("sluice_remote_delete_requests_total 0 after deletions")
	}
}
