package metadata

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/vfs"
)

func TestCheckUnregister(t *testing.T) {
	im := &Image{Brokers: map[int32]Broker{
		1: {ID: 1},
		2: {ID: 2, Fenced: true},
		3: {ID: 3, ShuttingDown: true},
		4: {ID: 4, Fenced: true},
	}, Topics: map[string]*Topic{
		"a": {Name: "a", Partitions: []Partition{{Index: 0, Replicas: []int32{1, 2}}, {Index: 1, Replicas: []int32{1}}}},
		// A reassignment in progress still lists its removing replica.
		"b": {Name: "b", Partitions: []Partition{{Index: 0, Replicas: []int32{1, 3}, RemovingReplicas: []int32{3}}}},
	}}
	for _, tc := range []struct {
		id   int32
		want *kerr.Error
		msg  string
	}{
		{9, kerr.BrokerIDNotRegistered, "not registered"},
		{1, kerr.InvalidRequest, "is active"},
		{2, kerr.InvalidRequest, "hosts 1 partition replicas (a-0)"},
		{3, kerr.InvalidRequest, "hosts 1 partition replicas (b-0)"},
		{4, nil, ""},
	} {
		err := CheckUnregister(im, tc.id)
		if tc.want == nil {
			if err != nil {
				t.Fatalf("broker %d: %v", tc.id, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("broker %d: %v, want %v containing %q", tc.id, err, tc.want, tc.msg)
		}
	}
}

func TestLocalUnregister(t *testing.T) {
	l, err := OpenLocal(vfs.NewMem(), "/meta", config.Defaults(), Broker{ID: 7, Host: "h", Port: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.UnregisterBroker(ctx, 8); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unknown broker: %v", err)
	}
	if err := l.UnregisterBroker(ctx, 7); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("itself: %v", err)
	}
	if _, ok := l.Image().Brokers[7]; !ok {
		t.Fatal("the broker was removed")
	}
}
