package metadata

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/vfs"
)

// Broker and group configs are changed incrementally or replaced whole,
// checked, kept in the image file across a reopen, and a resource left
// with no config is dropped.
func TestLocalResourceConfigs(t *testing.T) {
	dir := t.TempDir()
	open := func() *Local {
		l, err := OpenLocal(vfs.Default, dir, config.Defaults(), Broker{ID: 1, Host: "localhost", Port: 9092}, "")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx := context.Background()
	l := open()
	def := ConfigResource{Type: ResourceBroker, Name: ""}
	one := ConfigResource{Type: ResourceBroker, Name: "1"}
	grp := ConfigResource{Type: ResourceGroup, Name: "g"}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.AlterResourceConfigs(ctx, def, []ConfigOp{{Name: "log.retention.ms", Value: "1000"}, {Name: "log.cleanup.policy", Op: 2, Value: "compact"}}, false, false))
	must(l.AlterResourceConfigs(ctx, one, []ConfigOp{{Name: "message.max.bytes", Value: "2000"}, {Name: "background.threads", Value: "9"}}, false, false))
	must(l.AlterResourceConfigs(ctx, one, []ConfigOp{{Name: "background.threads", Op: 1}}, false, false))
	must(l.AlterResourceConfigs(ctx, grp, []ConfigOp{{Name: "consumer.session.timeout.ms", Value: "50000"}}, false, false))
	must(l.AlterResourceConfigs(ctx, def, []ConfigOp{{Name: "log.segment.bytes", Value: "2048"}}, false, true)) // validate only

	for _, c := range []struct {
		r    ConfigResource
		ops  []ConfigOp
		code *kerr.Error
	}{
		{def, []ConfigOp{{Name: "broker.id", Value: "2"}}, kerr.InvalidRequest},
		{def, []ConfigOp{{Name: "log.segment.bytes", Value: "1"}}, kerr.InvalidRequest},
		{def, []ConfigOp{{Name: "unknown.key", Value: "1"}}, kerr.InvalidConfig},
		{def, []ConfigOp{{Name: "log.retention.ms", Op: 2, Value: "1"}}, kerr.InvalidConfig},
		{def, []ConfigOp{{Name: "log.retention.ms", Value: "1"}, {Name: "log.retention.ms", Value: "2"}}, kerr.InvalidRequest},
		{ConfigResource{Type: ResourceBroker, Name: "x"}, []ConfigOp{{Name: "log.retention.ms", Value: "1"}}, kerr.InvalidRequest},
		{ConfigResource{Type: ResourceGroup}, []ConfigOp{{Name: "consumer.session.timeout.ms", Value: "50000"}}, kerr.InvalidRequest},
		{grp, []ConfigOp{{Name: "consumer.session.timeout.ms", Value: "1000"}}, kerr.InvalidConfig},
	} {
		if err := l.AlterResourceConfigs(ctx, c.r, c.ops, false, false); !errors.Is(err, c.code) {
			t.Errorf("%v %v: %v, want %v", c.r, c.ops, err, c.code)
		}
	}
	want := map[string]map[string]string{
		"":  {"log.retention.ms": "1000", "log.cleanup.policy": "delete,compact"},
		"1": {"message.max.bytes": "2000"},
	}
	check := func(im *Image) {
		t.Helper()
		if !maps.EqualFunc(im.BrokerConfigs, want, maps.Equal) {
			t.Errorf("broker configs %v, want %v", im.BrokerConfigs, want)
		}
		if g := im.ResourceConfigs(grp); len(g) != 1 || g["consumer.session.timeout.ms"] != "50000" {
			t.Errorf("group configs %v", g)
		}
	}
	check(l.Image())
	l = open()
	check(l.Image())

	// Legacy AlterConfigs replaces the whole set; an empty one removes the
	// resource.
	must(l.AlterResourceConfigs(ctx, def, []ConfigOp{{Name: "log.roll.ms", Value: "5000"}}, true, false))
	must(l.AlterResourceConfigs(ctx, one, nil, true, false))
	if got := l.Image().BrokerConfigs; len(got) != 1 || !maps.Equal(got[""], map[string]string{"log.roll.ms": "5000"}) {
		t.Errorf("after replace: %v", got)
	}
}
