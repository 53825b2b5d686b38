package handler_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// throttleHook counts the throttles franz-go reports (KIP-219).
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// A producer_byte_rate set with kadm for a client id holds that client,
// producing as fast as it can, near the quota (after the first window,
// which Kafka's rate lets through as a burst), with throttle times in its
// responses; another client id is not limited; DescribeClientQuotas
// returns what was set and AlterClientQuotas refuses what Kafka refuses.
func TestProducerByteRateQuota(t *testing.T) {
	const quota = 256 << 10 // bytes/s
	n := startNode(t, "", map[string]string{"quota.window.num": "2", "quota.window.size.seconds": "1"})
	adm := kadm.NewClient(n.client())
	c := ctx(t)
	if _, err := adm.CreateTopic(c, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	slow := "slow"
	res, err := adm.AlterClientQuotas(c, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &slow}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &slow}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "no_such_quota", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user"}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1.5}}},
		{Entity: kadm.ClientQuotaEntity{}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 || res[0].Err != nil || !errors.Is(res[1].Err, kerr.InvalidRequest) ||
		!errors.Is(res[2].Err, kerr.InvalidRequest) || !errors.Is(res[3].Err, kerr.InvalidRequest) {
		t.Fatalf("AlterClientQuotas results %+v", res)
	}
	desc, err := adm.DescribeClientQuotas(c, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &slow}})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 1 || len(desc[0].Values) != 1 || desc[0].Values[0].Key != "producer_byte_rate" || desc[0].Values[0].Value != quota {
		t.Fatalf("DescribeClientQuotas %+v", desc)
	}

	rate := func(clientID string, hook *throttleHook) float64 {
		cl := n.client(kgo.ClientID(clientID), kgo.WithHooks(hook), kgo.DefaultProduceTopic("q"),
			kgo.ProducerLinger(0), kgo.MaxBufferedRecords(64),
			// The quota counts bytes on the wire: send them uncompressed.
			// and in requests small next to a second's quota.
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10))
		val := bytes.Repeat([]byte("x"), 16<<10)
		start := time.Now()
		var mu sync.Mutex
		var counted int64
		pctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		for pctx.Err() == nil {
			cl.Produce(pctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
				if err == nil && time.Since(start) > time.Second {
					mu.Lock()
					counted += int64(len(r.Value))
					mu.Unlock()
				}
			})
		}
		cl.Flush(context.Background())
		el := time.Since(start) - time.Second
		mu.Lock()
		defer mu.Unlock()
		return float64(counted) / el.Seconds()
	}
	var hook throttleHook
	got := rate(slow, &hook)
	t.Logf("client %s: %.0f B/s with quota %d, %d throttled responses", slow, got, quota, hook.n.Load())
	if got < 0.7*quota || got > 1.3*quota {
		t.Errorf("measured %.0f B/s, want within 30%% of %d", got, quota)
	}
	if hook.n.Load() == 0 {
		t.Error("no response carried a throttle time")
	}
	var free throttleHook
	if got := rate("fast", &free); got < 2*quota || free.n.Load() != 0 {
		t.Errorf("unlimited client: %.0f B/s, %d throttles", got, free.n.Load())
	}
}

// With an authorizer, the quota APIs need ALTER_CONFIGS and
// DESCRIBE_CONFIGS on the cluster.
func TestClientQuotasAuthorized(t *testing.T) {
	n := startNode(t, "", map[string]string{"authorizer.class.name": standardAuthorizer, "super.users": "User:admin"})
	adm := kadm.NewClient(n.client())
	c := ctx(t)
	id := "c1"
	res, err := adm.AlterClientQuotas(c, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &id}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1000}}}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("AlterClientQuotas without ALTER_CONFIGS: %+v %v", res, err)
	}
	if _, err := adm.DescribeClientQuotas(c, false, nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("DescribeClientQuotas without DESCRIBE_CONFIGS: %v", err)
	}
}
