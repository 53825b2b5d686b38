package cli

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/internal/testproc"
)

// quotaJSON is `quota get --json` output.
type quotaJSON struct {
	Quotas []struct {
		Entity map[string]*string `json:"entity"`
		Values map[string]float64 `json:"values"`
	} `json:"quotas"`
}

// TestQuotaCommands: quota set stores client quotas for a user, a client
// id, a user with a client id and the user default (kafka-configs.sh's
// --user/--client/--user-defaults, --add-config), a separate franz-go
// client sees them with DescribeClientQuotas, quota get lists every entity
// or exactly one, delete removes keys or every quota of an entity; the
// broker's refusal of an unknown key is the command's error.
func TestQuotaCommands(t *testing.T) {
	p := testproc.Start(t, testproc.Options{HTTPPort: -1})
	b := "--bootstrap-server=" + p.Addr()
	adm := kadm.NewClient(p.Client(t))

	r := ok(t, "", "quota", "set", "--user", "alice", "producer_byte_rate=1048576", "consumer_byte_rate=2097152", b)
	if !strings.Contains(r.stdout, "Updated the quotas of user alice: producer_byte_rate=1048576 consumer_byte_rate=2097152.") {
		t.Errorf("set output:\n%s", r)
	}
	ok(t, "", "quota", "set", "--client", "app", "--add-config", "request_percentage=50,controller_mutation_rate=10", b)
	ok(t, "", "quota", "set", "--user", "alice", "--client", "app", "producer_byte_rate=512", b)
	ok(t, "", "quota", "set", "--user-defaults", "consumer_byte_rate=1000", b)
	// sluice keeps no address quotas: the broker's refusal is the error.
	fails(t, 1, "not supported", "quota", "set", "--ip", "10.0.0.1", "connection_creation_rate=5", b)

	qs, err := adm.DescribeClientQuotas(ctxT(t), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 4 {
		t.Errorf("DescribeClientQuotas: %d entities, want 4: %+v", len(qs), qs)
	}

	var q quotaJSON
	q = quotaJSON{}
	jsonOut(t, &q, "quota", "get", b)
	if len(q.Quotas) != 4 {
		t.Fatalf("get: %+v", q)
	}
	q = quotaJSON{}
	jsonOut(t, &q, "quota", "get", "--user", "alice", b)
	if len(q.Quotas) != 1 || *q.Quotas[0].Entity["user"] != "alice" || len(q.Quotas[0].Entity) != 1 ||
		q.Quotas[0].Values["producer_byte_rate"] != 1048576 || q.Quotas[0].Values["consumer_byte_rate"] != 2097152 {
		t.Errorf("get --user alice: %+v", q)
	}
	q = quotaJSON{}
	jsonOut(t, &q, "quota", "get", "--user-defaults", b)
	if len(q.Quotas) != 1 || q.Quotas[0].Entity["user"] != nil || q.Quotas[0].Values["consumer_byte_rate"] != 1000 {
		t.Errorf("get --user-defaults: %+v", q)
	}
	r = ok(t, "", "quota", "get", "--user", "alice", "--client", "app", b)
	if row(r.stdout, "alice", "app", "-", "producer_byte_rate", "512") == nil {
		t.Errorf("get --user alice --client app:\n%s", r)
	}

	ok(t, "", "quota", "delete", "--user", "alice", "--delete-config", "producer_byte_rate", b)
	q = quotaJSON{}
	jsonOut(t, &q, "quota", "get", "--user", "alice", b)
	if len(q.Quotas) != 1 || len(q.Quotas[0].Values) != 1 || q.Quotas[0].Values["consumer_byte_rate"] != 2097152 {
		t.Errorf("after deleting alice's producer_byte_rate: %+v", q)
	}
	ok(t, "", "quota", "delete", "--client", "app", b)
	q = quotaJSON{}
	jsonOut(t, &q, "quota", "get", "--client", "app", b)
	if len(q.Quotas) != 0 {
		t.Errorf("after deleting every quota of client app: %+v", q)
	}
	fails(t, 1, "client-id app has no quotas", "quota", "delete", "--client", "app", b)
	fails(t, 1, "quotas of user bob", "quota", "set", "--user", "bob", "bogus_rate=1", b)
	fails(t, 2, "needs an entity", "quota", "set", "producer_byte_rate=1", b)
	fails(t, 2, "expected a number", "quota", "set", "--user", "bob", "producer_byte_rate=fast", b)
}
