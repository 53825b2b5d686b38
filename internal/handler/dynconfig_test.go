package handler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/config"
)

// brokerConfig finds name in a DescribeConfigs result.
func configOf(t *testing.T, rcs kadm.ResourceConfigs, resource, name string) (kadm.Config, bool) {
	t.Helper()
	rc, err := rcs.On(resource, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %q: %v %v %s", resource, err, rc.Err, rc.ErrMessage)
	}
	for _, c := range rc.Configs {
		if c.Key == name {
			return c, true
		}
	}
	return kadm.Config{}, false
}

// Dynamic broker configs (KIP-226) with kadm: a cluster default and a
// per-broker value are reported with their sources on the broker and on
// topics, applied at once (message.max.bytes refuses a larger batch),
// refused with Kafka's errors when read-only or unknown, replaced whole
// by the legacy AlterConfigs, and kept across a restart.
func TestDynamicBrokerConfigs(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, map[string]string{"log.retention.hours": "2"})
	cl := n.client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	c := ctx(t)
	if _, err := adm.CreateTopic(c, 1, 1, nil, "dyn"); err != nil {
		t.Fatal(err)
	}
	alter := func(set []kadm.AlterConfig, brokers ...int32) kadm.AlterConfigsResponse {
		t.Helper()
		rs, err := adm.AlterBrokerConfigs(c, set, brokers...)
		if err != nil || len(rs) != 1 {
			t.Fatalf("alter: %v %v", rs, err)
		}
		return rs[0]
	}
	if r := alter([]kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("123456")}, {Name: "log.cleanup.policy", Op: kadm.AppendConfig, Value: kadm.StringPtr("compact")}}); r.Err != nil {
		t.Fatalf("cluster default: %v %s", r.Err, r.ErrMessage)
	}
	if r := alter([]kadm.AlterConfig{{Name: "message.max.bytes", Value: kadm.StringPtr("1000")}}, 1); r.Err != nil {
		t.Fatalf("broker 1: %v %s", r.Err, r.ErrMessage)
	}

	rcs, err := adm.DescribeTopicConfigs(c, "dyn")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]any{
		"retention.ms":      {"123456", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		"cleanup.policy":    {"delete,compact", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		"max.message.bytes": {"1000", kmsg.ConfigSourceDynamicBrokerConfig},
	} {
		if cf, _ := configOf(t, rcs, "dyn", name); cf.MaybeValue() != want[0] || cf.Source != want[1] {
			t.Errorf("topic %s = %q (%v), want %v", name, cf.MaybeValue(), cf.Source, want)
		}
	}
	rcs, err = adm.DescribeBrokerConfigs(c)
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := rcs.On("", nil); len(rc.Configs) != 2 {
		t.Errorf("cluster default lists %d configs, want its 2: %+v", len(rc.Configs), rc.Configs)
	}
	if cf, ok := configOf(t, rcs, "", "log.retention.ms"); !ok || cf.MaybeValue() != "123456" || cf.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("cluster default log.retention.ms %+v", cf)
	}
	rcs, err = adm.DescribeBrokerConfigs(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]any{
		"message.max.bytes":   {"1000", kmsg.ConfigSourceDynamicBrokerConfig},
		"log.retention.ms":    {"123456", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		"log.retention.hours": {"2", kmsg.ConfigSourceStaticBrokerConfig},
		"log.segment.bytes":   {"1073741824", kmsg.ConfigSourceDefaultConfig},
	} {
		if cf, _ := configOf(t, rcs, "1", name); cf.MaybeValue() != want[0] || cf.Source != want[1] {
			t.Errorf("broker %s = %q (%v), want %v", name, cf.MaybeValue(), cf.Source, want)
		}
	}
	// Synonyms, highest precedence first (ConfigHelper.configSynonyms).
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeBroker, "1", []string{"log.retention.ms"}
	req.Resources = append(req.Resources, rr)
	resp := request[*kmsg.DescribeConfigsResponse](t, cl, req)
	if len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("describe log.retention.ms with synonyms: %+v", resp.Resources)
	}
	var syn []string
	for _, s := range resp.Resources[0].Configs[0].ConfigSynonyms {
		syn = append(syn, s.Name+"="+*s.Value+"/"+s.Source.String())
	}
	if got := strings.Join(syn, " "); got != "log.retention.ms=123456/DYNAMIC_DEFAULT_BROKER_CONFIG log.retention.hours=2/STATIC_BROKER_CONFIG log.retention.ms=604800000/DEFAULT_CONFIG log.retention.hours=168/DEFAULT_CONFIG" {
		t.Errorf("synonyms: %s", got)
	}
	if resp.Resources[0].Configs[0].ReadOnly {
		t.Error("log.retention.ms described read-only")
	}
	req.Resources[0].ConfigNames = []string{"log.dirs"}
	if resp := request[*kmsg.DescribeConfigsResponse](t, cl, req); !resp.Resources[0].Configs[0].ReadOnly {
		t.Error("log.dirs described as dynamic")
	}

	// Applied at once: a 2000-byte batch is over message.max.bytes.
	big := &kgo.Record{Topic: "dyn", Key: []byte("k"), Value: make([]byte, 2000)} // keyed: the topic is compacted too
	if err := cl.ProduceSync(c, big).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("produce over the dynamic message.max.bytes: %v", err)
	}

	// Kafka's errors.
	for _, tc := range []struct {
		set     []kadm.AlterConfig
		brokers []int32
		code    *kerr.Error
		msg     string
	}{
		{[]kadm.AlterConfig{{Name: "log.dirs", Value: kadm.StringPtr("/x")}}, nil, kerr.InvalidRequest, "Cannot update these configs dynamically: Set(log.dirs)"},
		{[]kadm.AlterConfig{{Name: "no.such.key", Value: kadm.StringPtr("1")}}, []int32{1}, kerr.InvalidConfig, "no.such.key"},
		{[]kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("x")}}, nil, kerr.InvalidRequest, `invalid value "x" for log.retention.ms`},
		{[]kadm.AlterConfig{{Name: "sasl.kerberos.min.time.before.relogin", Value: kadm.StringPtr("58000")}}, nil, kerr.InvalidRequest, "broker id must be specified"},
	} {
		r := alter(tc.set, tc.brokers...)
		if !errors.Is(r.Err, tc.code) || !strings.Contains(r.ErrMessage, tc.msg) {
			t.Errorf("%s: %v %q, want %v %q", tc.set[0].Name, r.Err, r.ErrMessage, tc.code, tc.msg)
		}
	}

	// Legacy AlterConfigs (librdkafka's 0081): the set replaces the
	// broker's dynamic configs, message.max.bytes among them.
	rs, err := adm.AlterBrokerConfigsState(c, []kadm.AlterConfig{{Name: "sasl.kerberos.min.time.before.relogin", Value: kadm.StringPtr("58000")}}, 1)
	if err != nil || len(rs) != 1 || rs[0].Err != nil {
		t.Fatalf("legacy AlterConfigs: %v %v", rs, err)
	}
	if err := cl.ProduceSync(c, big).FirstErr(); err != nil {
		t.Errorf("produce after the legacy AlterConfigs removed message.max.bytes: %v", err)
	}

	// Kept across a restart.
	n.stop()
	n = startNode(t, dir, map[string]string{"log.retention.hours": "2"})
	adm = kadm.NewClient(n.client())
	rcs, err = adm.DescribeBrokerConfigs(ctx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"log.retention.ms": "123456", "sasl.kerberos.min.time.before.relogin": "58000"} {
		if cf, _ := configOf(t, rcs, "1", name); cf.MaybeValue() != want {
			t.Errorf("after restart %s = %q, want %s", name, cf.MaybeValue(), want)
		}
	}
	if cf, _ := configOf(t, rcs, "1", "message.max.bytes"); cf.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("after restart message.max.bytes %q from %v", cf.MaybeValue(), cf.Source)
	}
}

// Group configs (KIP-848) with raw requests, as kafka-configs.sh
// --entity-type groups sends them: described with their defaults, set and
// deleted incrementally, checked against the broker's bounds, replaced by
// the legacy AlterConfigs.
func TestGroupConfigs(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	describe := func(group string) *kmsg.DescribeConfigsResponseResource {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, rr)
		return &request[*kmsg.DescribeConfigsResponse](t, cl, req).Resources[0]
	}
	value := func(r *kmsg.DescribeConfigsResponseResource, name string) (string, kmsg.ConfigSource) {
		for _, c := range r.Configs {
			if c.Name == name {
				return *c.Value, c.Source
			}
		}
		return "", 0
	}
	incr := func(group string, op kmsg.IncrementalAlterConfigOp, name, v string) *kmsg.IncrementalAlterConfigsResponseResource {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op = name, op
		if op != kmsg.IncrementalAlterConfigOpDelete {
			c.Value = &v
		}
		rr.Configs = append(rr.Configs, c)
		req.Resources = append(req.Resources, rr)
		return &request[*kmsg.IncrementalAlterConfigsResponse](t, cl, req).Resources[0]
	}
	r := describe("my-group")
	if r.ErrorCode != 0 || len(r.Configs) != len(config.GroupDefs) {
		t.Fatalf("describe: %v, %d configs", kerr.ErrorForCode(r.ErrorCode), len(r.Configs))
	}
	if v, src := value(r, "consumer.session.timeout.ms"); v != "45000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("default consumer.session.timeout.ms %s %v", v, src)
	}
	if a := incr("my-group", kmsg.IncrementalAlterConfigOpSet, "consumer.session.timeout.ms", "50000"); a.ErrorCode != 0 {
		t.Fatalf("set: %v", kerr.ErrorForCode(a.ErrorCode))
	}
	if v, src := value(describe("my-group"), "consumer.session.timeout.ms"); v != "50000" || src != kmsg.ConfigSourceGroupConfig {
		t.Errorf("after set: %s %v", v, src)
	}
	if v, src := value(describe("other"), "consumer.session.timeout.ms"); v != "45000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("another group: %s %v", v, src)
	}
	if a := incr("my-group", kmsg.IncrementalAlterConfigOpSet, "consumer.session.timeout.ms", "1000"); a.ErrorCode != kerr.InvalidConfig.Code ||
		!strings.Contains(*a.ErrorMessage, "group.consumer.min.session.timeout.ms") {
		t.Errorf("below the bound: %v %v", kerr.ErrorForCode(a.ErrorCode), a.ErrorMessage)
	}
	if a := incr("my-group", kmsg.IncrementalAlterConfigOpSet, "bogus", "1"); a.ErrorCode != kerr.InvalidConfig.Code {
		t.Errorf("unknown group config: %v", kerr.ErrorForCode(a.ErrorCode))
	}
	if r := describe(""); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("describe an empty group name: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// Legacy AlterConfigs replaces the group's set.
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "my-group"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	v := "7000"
	c.Name, c.Value = "consumer.heartbeat.interval.ms", &v
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	if a := request[*kmsg.AlterConfigsResponse](t, cl, req).Resources[0]; a.ErrorCode != 0 {
		t.Fatalf("legacy: %v", kerr.ErrorForCode(a.ErrorCode))
	}
	r = describe("my-group")
	if v, src := value(r, "consumer.session.timeout.ms"); v != "45000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("after legacy replace, session timeout %s %v", v, src)
	}
	if v, src := value(r, "consumer.heartbeat.interval.ms"); v != "7000" || src != kmsg.ConfigSourceGroupConfig {
		t.Errorf("after legacy replace, heartbeat %s %v", v, src)
	}
	if a := incr("my-group", kmsg.IncrementalAlterConfigOpDelete, "consumer.heartbeat.interval.ms", ""); a.ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(a.ErrorCode))
	}
	if v, src := value(describe("my-group"), "consumer.heartbeat.interval.ms"); v != "5000" || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("after delete: %s %v", v, src)
	}
}

// With an authorizer and no ACL, group configs need DESCRIBE_CONFIGS and
// ALTER_CONFIGS on the group, broker configs on the cluster.
func TestResourceConfigsAuthorization(t *testing.T) {
	n := startNode(t, "", map[string]string{"authorizer.class.name": standardAuthorizer})
	cl := n.client()
	for _, typ := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeGroupConfig, kmsg.ConfigResourceTypeBroker} {
		want := kerr.GroupAuthorizationFailed.Code
		name := "g"
		if typ == kmsg.ConfigResourceTypeBroker {
			want, name = kerr.ClusterAuthorizationFailed.Code, "1"
		}
		d := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName = typ, name
		d.Resources = append(d.Resources, dr)
		if got := request[*kmsg.DescribeConfigsResponse](t, cl, d).Resources[0].ErrorCode; got != want {
			t.Errorf("describe %v: %v", typ, kerr.ErrorForCode(got))
		}
		a := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = typ, name
		a.Resources = append(a.Resources, ar)
		if got := request[*kmsg.IncrementalAlterConfigsResponse](t, cl, a).Resources[0].ErrorCode; got != want {
			t.Errorf("alter %v: %v", typ, kerr.ErrorForCode(got))
		}
	}
}
