// Package dynconfig holds real-process tests of dynamic broker configs
// (KIP-226).
package dynconfig

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

func TestMain(m *testing.M) { testproc.Main(m) }

// describeOn sends DescribeConfigs for one broker resource (name "" is the
// cluster default) to broker node, and returns name -> (value, source).
func describeOn(ctx context.Context, cl *kgo.Client, node int32, name string, keys ...string) (map[string]kmsg.DescribeConfigsResponseResourceConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeBroker, name, keys
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
	if err != nil {
		return nil, err
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, err
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range r.Configs {
		out[c.Name] = c
	}
	return out, nil
}

// TestDynamicBrokerConfigs: on three processes, a cluster default
// (message.max.bytes, log.retention.ms, log.roll.ms) and a per-broker
// value (broker 2's leader.replication.throttled.rate) are set with kadm;
// every broker describes them with Kafka's sources (its own value as
// DYNAMIC_BROKER_CONFIG, the default as DYNAMIC_DEFAULT_BROKER_CONFIG);
// they act at once (a larger batch is refused, old segments expire by the
// new retention); and all of it survives a kill and restart of the
// whole cluster.
func TestDynamicBrokerConfigs(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := testcluster.Start(t, testcluster.Options{Nodes: 3,
		Props: map[string]string{"auto.create.topics.enable": "false", "log.retention.check.interval.ms": "300"}})
	const topic = "dyn"
	c.CreateTopic(topic, 1, 3, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := c.Admin()
	alter := func(set []kadm.AlterConfig, brokers ...int32) {
		t.Helper()
		rs, err := adm.AlterBrokerConfigs(ctx, set, brokers...)
		if err == nil {
			err = rs[0].Err
		}
		if err != nil {
			t.Fatalf("alter %v on %v: %v %s", set[0].Name, brokers, err, rs[0].ErrMessage)
		}
	}
	alter([]kadm.AlterConfig{
		{Name: "message.max.bytes", Value: kadm.StringPtr("1000")},
		{Name: "log.retention.ms", Value: kadm.StringPtr("2000")},
		{Name: "log.roll.ms", Value: kadm.StringPtr("1000")},
	})
	alter([]kadm.AlterConfig{{Name: "leader.replication.throttled.rate", Value: kadm.StringPtr("50000000")}}, 2)

	cl := c.Client(kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.RecordRetries(3))
	checkDescribed := func(when string) {
		t.Helper()
		for _, p := range c.Nodes() {
			id := int32(p.NodeID())
			testcluster.WaitFor(t, 30*time.Second, "broker "+strconv.Itoa(int(id))+" describing the dynamic configs "+when, func() (bool, string) {
				def, err := describeOn(ctx, cl, id, "")
				if err != nil {
					return false, err.Error()
				}
				if d := def["message.max.bytes"]; d.Value == nil || *d.Value != "1000" || d.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
					return false, "cluster default: " + strconv.Itoa(len(def)) + " configs"
				}
				own, err := describeOn(ctx, cl, id, strconv.Itoa(int(id)), "message.max.bytes", "leader.replication.throttled.rate", "log.retention.ms")
				if err != nil {
					return false, err.Error()
				}
				if m := own["message.max.bytes"]; *m.Value != "1000" || m.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
					return false, "message.max.bytes " + *m.Value + " " + m.Source.String()
				}
				wantRate, wantSrc := "9223372036854775807", kmsg.ConfigSourceDefaultConfig
				if id == 2 {
					wantRate, wantSrc = "50000000", kmsg.ConfigSourceDynamicBrokerConfig
				}
				if r := own["leader.replication.throttled.rate"]; *r.Value != wantRate || r.Source != wantSrc {
					return false, "throttle " + *r.Value + " " + r.Source.String()
				}
				return true, ""
			})
		}
		// A topic's retention.ms comes from the dynamic default.
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On(topic, nil)
		for _, cf := range rc.Configs {
			if cf.Key == "retention.ms" && (cf.MaybeValue() != "2000" || cf.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig) {
				t.Errorf("%s: topic retention.ms %s from %v", when, cf.MaybeValue(), cf.Source)
			}
		}
	}
	checkApplied := func(when string) {
		t.Helper()
		big := &kgo.Record{Value: make([]byte, 2000)}
		if err := cl.ProduceSync(ctx, big).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("%s: a 2000-byte batch over the dynamic message.max.bytes: %v", when, err)
		}
		// Segments roll after a second and expire after two: the log
		// start moves past what was written before.
		var last int64
		for i := 0; i < 3; i++ {
			r := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("small")})
			if err := r.FirstErr(); err != nil {
				t.Fatalf("%s: produce: %v", when, err)
			}
			last = r[0].Record.Offset
			time.Sleep(1100 * time.Millisecond)
		}
		testcluster.WaitFor(t, 60*time.Second, when+": old segments deleted by the dynamic log.retention.ms", func() (bool, string) {
			cl.ProduceSync(ctx, &kgo.Record{Value: []byte("roll")})
			so, err := adm.ListStartOffsets(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			o, _ := so.Lookup(topic, 0)
			return o.Offset > last-2, "log start " + strconv.FormatInt(o.Offset, 10) + ", written up to " + strconv.FormatInt(last, 10)
		})
	}
	checkDescribed("after the change")
	checkApplied("after the change")

	for _, p := range c.Nodes() {
		p.Kill()
	}
	for _, p := range c.Nodes() {
		p.Restart()
	}
	c.WaitBrokers(3, 60*time.Second)
	c.WaitTopicReady(topic, 1, 60*time.Second)
	checkDescribed("after a restart")
	checkApplied("after a restart")
}
