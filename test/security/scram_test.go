package security

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func scram256(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
}

func scram512(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

// authErr is the error of one Metadata request through mech at addr.
func authErr(t *testing.T, addr string, mech sasl.Mechanism) error {
	t.Helper()
	cl := client(t, kgo.SeedBrokers(addr), kgo.SASL(mech), kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx(t, 10*time.Second), cl)
	cl.Close()
	return err
}

// TestSASLScram: the bootstrap admin (sluice.scram.bootstrap.credentials,
// SCRAM-SHA-512) creates users with kadm's AlterUserSCRAMs; they produce
// and consume with SCRAM-SHA-256 and -512; a wrong password, a mechanism
// without a credential and a deleted user are refused.
func TestSASLScram(t *testing.T) {
	_, saslAddr := saslNode(t, map[string]string{"sluice.scram.bootstrap.credentials": `SCRAM-SHA-512=[name=admin,password="adm;n,secret]"]`})
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = authErr(t, saslAddr, scram512("admin", "adm;n,secret]")); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("bootstrap admin: %v", err)
	}
	admin := client(t, kgo.SeedBrokers(saslAddr), kgo.SASL(scram512("admin", "adm;n,secret]")))
	adm := kadm.NewClient(admin)
	c := ctx(t, 60*time.Second)
	res, err := adm.AlterUserSCRAMs(c, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-scram"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-scram"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	// Refused by the broker (kadm checks this too, so the request is raw).
	raw := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "carol", 1, 100, []byte("salt"), []byte("0123456789abcdef0123456789abcdef")
	raw.Upsertions = append(raw.Upsertions, up)
	if rr, err := raw.RequestWith(c, admin); err != nil || len(rr.Results) != 1 || rr.Results[0].ErrorCode != kerr.UnacceptableCredential.Code {
		t.Errorf("100 iterations: %v %+v, want UNACCEPTABLE_CREDENTIAL", err, rr)
	}
	desc, err := adm.DescribeUserSCRAMs(c, "alice", "bob", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if d := desc["alice"]; d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha256 || d.CredInfos[0].Iterations != 4096 {
		t.Errorf("describe alice: %+v", d)
	}
	if d := desc["bob"]; d.Err != nil || len(d.CredInfos) != 1 || d.CredInfos[0].Iterations != 8192 {
		t.Errorf("describe bob: %+v", d)
	}
	if !errors.Is(desc["nobody"].Err, kerr.ResourceNotFound) {
		t.Errorf("describe nobody: %v", desc["nobody"].Err)
	}

	alice := []kgo.Opt{kgo.SeedBrokers(saslAddr), kgo.SASL(scram256("alice", "alice-scram"))}
	produceConsume(t, "scram256", [][]byte{[]byte("a1"), []byte("a2")}, client(t, alice...), alice...)
	bob := []kgo.Opt{kgo.SeedBrokers(saslAddr), kgo.SASL(scram512("bob", "bob-scram"))}
	produceConsume(t, "scram512", [][]byte{[]byte("b1")}, client(t, bob...), bob...)

	for name, mech := range map[string]sasl.Mechanism{
		"wrong password":             scram256("alice", "nope"),
		"no SCRAM-SHA-512 for alice": scram512("alice", "alice-scram"),
		"unknown user":               scram256("mallory", "x"),
	} {
		if err := authErr(t, saslAddr, mech); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	del, err := adm.AlterUserSCRAMs(c, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || del.Error() != nil {
		t.Fatalf("delete alice: %v %v", err, del.Error())
	}
	if err := authErr(t, saslAddr, scram256("alice", "alice-scram")); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Errorf("deleted alice: %v", err)
	}
}
