package handler_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeBrokerConfigsHidesPasswords: a password-type broker setting
// is described as sensitive with no value (Kafka's isSensitive), other
// settings with theirs.
func TestDescribeBrokerConfigsHidesPasswords(t *testing.T) {
	n := startNode(t, "", map[string]string{"ssl.keystore.password": "s3cret", "num.partitions": "4"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeBroker
	r.ResourceName = "1"
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, n.client())
	if err != nil || len(resp.Resources) != 1 {
		t.Fatalf("DescribeConfigs: %v %+v", err, resp)
	}
	seen := 0
	for _, c := range resp.Resources[0].Configs {
		switch c.Name {
		case "ssl.keystore.password":
			seen++
			if c.Value != nil || !c.IsSensitive {
				t.Errorf("password described as %v (sensitive %v)", c.Value, c.IsSensitive)
			}
		case "num.partitions":
			seen++
			if c.Value == nil || *c.Value != "4" || c.IsSensitive {
				t.Errorf("num.partitions described as %v (sensitive %v)", c.Value, c.IsSensitive)
			}
		}
	}
	if seen != 2 {
		t.Errorf("described %d of the 2 settings", seen)
	}
}
