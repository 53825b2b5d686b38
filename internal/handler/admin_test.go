package handler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/config"
)

func strp(s string) *string { return &s }

func TestCreateTopicsValidation(t *testing.T) {
	n := startNode(t, "", nil)
	adm := kadm.NewClient(n.client())
	cases := []struct {
		name       string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       error
	}{
		{"ok-topic", 3, 1, map[string]*string{"retention.ms": strp("1000")}, nil},
		{strings.Repeat("x", 250), 1, 1, nil, kerr.InvalidTopicException},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"rf-too-big", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"bad-config", 1, 1, map[string]*string{"retention.ms": strp("soon")}, kerr.InvalidConfig},
		{"unknown-config", 1, 1, map[string]*string{"no.such.config": strp("1")}, kerr.InvalidConfig},
		{"zero-partitions", 0, 1, nil, kerr.InvalidPartitions},
	}
	for _, tc := range cases {
		resp, err := adm.CreateTopics(ctx(t), tc.partitions, tc.rf, tc.configs, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp[tc.name].Err; !errors.Is(got, tc.want) && !(got == nil && tc.want == nil) {
			t.Errorf("%.20s: got %v want %v", tc.name, got, tc.want)
		}
	}
	resp, _ := adm.CreateTopics(ctx(t), 3, 1, nil, "ok-topic")
	if !errors.Is(resp["ok-topic"].Err, kerr.TopicAlreadyExists) {
		t.Fatal("duplicate create:", resp["ok-topic"].Err)
	}
	vo, err := adm.ValidateCreateTopics(ctx(t), 2, 1, nil, "validate-only")
	if err != nil || vo["validate-only"].Err != nil {
		t.Fatal(err, vo["validate-only"].Err)
	}
	md, _ := adm.Metadata(ctx(t))
	if md.Topics.Has("validate-only") || !md.Topics.Has("ok-topic") || len(md.Topics["ok-topic"].Partitions) != 3 {
		t.Fatalf("metadata topics: %v", md.Topics.Names())
	}
}

func TestDescribeAndAlterConfigs(t *testing.T) {
	n := startNode(t, "", map[string]string{"log.retention.hours": "48"})
	cl := n.client()
	adm := kadm.NewClient(cl)
	createTopic(t, cl, "cfg", 1, map[string]*string{"max.message.bytes": strp("5000")})
	rc, err := adm.DescribeTopicConfigs(ctx(t), "cfg")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rc[0].Configs {
		got[c.Key] = c
	}
	if len(got) != len(config.TopicDefs) {
		t.Fatalf("described %d configs, want every one of %d", len(got), len(config.TopicDefs))
	}
	if c := got["max.message.bytes"]; c.MaybeValue() != "5000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("max.message.bytes %+v", c)
	}
	if c := got["retention.ms"]; c.MaybeValue() != "172800000" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("retention.ms from log.retention.hours: %+v", c)
	}
	if c := got["cleanup.policy"]; c.MaybeValue() != "delete" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("cleanup.policy %+v", c)
	}
	// Incremental: set one, delete another.
	_, err = adm.AlterTopicConfigs(ctx(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("1234")},
		{Op: kadm.DeleteConfig, Name: "max.message.bytes"},
	}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ = adm.DescribeTopicConfigs(ctx(t), "cfg")
	for _, c := range rc[0].Configs {
		switch c.Key {
		case "retention.ms":
			if c.MaybeValue() != "1234" {
				t.Fatal("retention.ms not set:", c.MaybeValue())
			}
		case "max.message.bytes":
			if c.MaybeValue() != "1048588" {
				t.Fatal("max.message.bytes not reset:", c.MaybeValue())
			}
		}
	}
	bad, err := adm.AlterTopicConfigs(ctx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.insync.replicas", Value: strp("zero")}}, "cfg")
	if err == nil && (len(bad) == 0 || !errors.Is(bad[0].Err, kerr.InvalidConfig)) {
		t.Fatalf("invalid value accepted: %v", bad)
	}
	// Legacy AlterConfigs replaces the whole set.
	if _, err := adm.AlterTopicConfigsState(ctx(t), []kadm.AlterConfig{{Name: "segment.ms", Value: strp("60000")}}, "cfg"); err != nil {
		t.Fatal(err)
	}
	rc, _ = adm.DescribeTopicConfigs(ctx(t), "cfg")
	for _, c := range rc[0].Configs {
		if c.Key == "retention.ms" && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Fatal("legacy AlterConfigs kept a config it did not list")
		}
	}
	bc, err := adm.DescribeBrokerConfigs(ctx(t), 1)
	if err != nil || len(bc[0].Configs) == 0 {
		t.Fatal(err, bc)
	}
}

func TestTopicsSurviveRestart(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cl, "durable", 2, map[string]*string{"retention.ms": strp("99999")})
	if err := cl.ProduceSync(ctx(t), &kgo.Record{Topic: "durable", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dir := n.dir
	n.stop()
	n2 := startNode(t, dir, nil)
	adm := kadm.NewClient(n2.client())
	md, _ := adm.Metadata(ctx(t))
	if !md.Topics.Has("durable") || len(md.Topics["durable"].Partitions) != 2 {
		t.Fatal("topic lost on restart")
	}
	rc, _ := adm.DescribeTopicConfigs(ctx(t), "durable")
	found := false
	for _, c := range rc[0].Configs {
		found = found || (c.Key == "retention.ms" && c.MaybeValue() == "99999")
	}
	if !found {
		t.Fatal("topic config lost on restart")
	}
	ends, _ := adm.ListEndOffsets(ctx(t), "durable")
	if o, _ := ends.Lookup("durable", 1); o.Offset != 1 {
		t.Fatalf("end offset after restart %+v", o)
	}
}

func TestPartitionsRecordsOffsetsLogDirs(t *testing.T) {
	n := startNode(t, "", nil)
	cl := n.client()
	adm := kadm.NewClient(cl)
	createTopic(t, cl, "ops", 1, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Topic: "ops", Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Minute)}
		if err := cl.ProduceSync(ctx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// ListOffsets: earliest, latest, by timestamp.
	ends, _ := adm.ListEndOffsets(ctx(t), "ops")
	starts, _ := adm.ListStartOffsets(ctx(t), "ops")
	if e, _ := ends.Lookup("ops", 0); e.Offset != 10 {
		t.Fatalf("end %+v", e)
	}
	if s, _ := starts.Lookup("ops", 0); s.Offset != 0 {
		t.Fatalf("start %+v", s)
	}
	at, _ := adm.ListOffsetsAfterMilli(ctx(t), base.Add(150*time.Second).UnixMilli(), "ops")
	if o, _ := at.Lookup("ops", 0); o.Offset != 3 {
		t.Fatalf("by timestamp: %+v", o)
	}
	after, _ := adm.ListOffsetsAfterMilli(ctx(t), time.Now().Add(time.Hour).UnixMilli(), "ops")
	if o, _ := after.Lookup("ops", 0); o.Offset != 10 && o.Offset != -1 {
		t.Fatalf("timestamp after every record: %+v", o)
	}
	// DeleteRecords raises the log start; beyond the HW is out of range.
	dr, err := adm.DeleteRecords(ctx(t), kadm.Offsets{"ops": {0: {Topic: "ops", Partition: 0, At: 4}}})
	if err != nil || dr["ops"][0].Err != nil || dr["ops"][0].LowWatermark != 4 {
		t.Fatalf("delete records: %v %+v", err, dr)
	}
	dr, _ = adm.DeleteRecords(ctx(t), kadm.Offsets{"ops": {0: {Topic: "ops", Partition: 0, At: 11}}})
	if !errors.Is(dr["ops"][0].Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past HW: %+v", dr["ops"][0])
	}
	starts, _ = adm.ListStartOffsets(ctx(t), "ops")
	if s, _ := starts.Lookup("ops", 0); s.Offset != 4 {
		t.Fatalf("start after delete %+v", s)
	}
	// CreatePartitions grows; shrinking is refused.
	cp, err := adm.CreatePartitions(ctx(t), 2, "ops")
	if err != nil || cp["ops"].Err != nil {
		t.Fatal(err, cp)
	}
	cp, _ = adm.UpdatePartitions(ctx(t), 2, "ops")
	if !errors.Is(cp["ops"].Err, kerr.InvalidPartitions) {
		t.Fatal("no-op partition count accepted:", cp["ops"].Err)
	}
	// DescribeLogDirs reports sizes; DescribeCluster the node.
	dirs, err := adm.DescribeAllLogDirs(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "ops" {
				size += p.Size
			}
		})
	})
	if size <= 0 {
		t.Fatal("log dir size not reported")
	}
	bm, err := adm.BrokerMetadata(ctx(t))
	if err != nil || len(bm.Brokers) != 1 || bm.Brokers[0].NodeID != 1 {
		t.Fatal(err, bm)
	}
	// OffsetForLeaderEpoch: epoch 0 ends at the LEO.
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "ops"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch = 0
	rp.LeaderEpoch = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ol := request[*kmsg.OffsetForLeaderEpochResponse](t, cl, req)
	if p := ol.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.EndOffset != 10 || p.LeaderEpoch != 0 {
		t.Fatalf("offset for leader epoch %+v", p)
	}
	// DeleteTopics removes it.
	del, err := adm.DeleteTopics(ctx(t), "ops")
	if err != nil || del["ops"].Err != nil {
		t.Fatal(err, del)
	}
	md, _ := adm.Metadata(ctx(t))
	if md.Topics.Has("ops") && md.Topics["ops"].Err == nil {
		t.Fatal("topic still there after delete")
	}
}
