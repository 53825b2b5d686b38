package config

import (
	"strings"
	"testing"
)

// TestParseScramBootstrap: kafka-storage --add-scram's entry syntax, and
// errors that never quote the (secret) value.
func TestParseScramBootstrap(t *testing.T) {
	got, err := ParseScramBootstrap(` SCRAM-SHA-256=[name=admin,password=s1] ; scram-sha-512=[name=bob,password="a,b];c\"d",iterations=8192]`)
	if err != nil {
		t.Fatal(err)
	}
	want := []ScramBootstrap{{"SCRAM-SHA-256", "admin", "s1", 4096}, {"SCRAM-SHA-512", "bob", `a,b];c"d`, 8192}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{
		"PLAIN=[name=a,password=secret]", "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=[password=secret]",
		"SCRAM-SHA-256=[name=a,password=secret", `SCRAM-SHA-256=[name=a,password="secret]`, "SCRAM-SHA-256=[name=a,password=secret,iterations=10]",
		"SCRAM-SHA-256=[name=a,password=secret,salt=x]", "SCRAM-SHA-256=[name=a,password=secret] SCRAM-SHA-512=[name=b,password=secret]",
		"SCRAM-SHA-256=[name=a password=secret]", "secret",
	} {
		if _, err := ParseScramBootstrap(bad); err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error quotes the value: %v", bad, err)
		}
	}
	d, _ := BrokerDef("sluice.scram.bootstrap.credentials")
	if err := d.Validate("SCRAM-SHA-256=[name=a,password=secret"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("Validate: %v", err)
	}
}
