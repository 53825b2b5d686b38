package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testproc"
)

// userJSON is `user list|create|delete --json` output.
type userJSON struct {
	Users       []userEntry `json:"users"`
	Deleted     []userEntry `json:"deleted"`
	User        string      `json:"user"`
	Credentials []credEntry `json:"credentials"`
}

type userEntry struct {
	User        string      `json:"user"`
	Credentials []credEntry `json:"credentials"`
}

type credEntry struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

// TestUserCommands: user create sets SCRAM credentials (from
// --password-file and --password) that then authenticate the CLI itself
// on a SASL_PLAINTEXT listener through --command-config; user list shows
// the mechanisms and iterations; after user delete the same login is
// refused.
func TestUserCommands(t *testing.T) {
	ports, err := testproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	plain, sasl := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	props := writeProps(t, "listeners=PLAINTEXT://"+plain+",SASL_PLAINTEXT://"+sasl+"\n"+
		"sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512\n")
	testproc.Start(t, testproc.Options{ListenPort: ports[0], HTTPPort: -1, ExtraArgs: []string{"--config", props}})
	b := "--bootstrap-server=" + plain
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pwFile := write("alice.pw", "s3cret pass\n")
	aliceCfg := write("alice.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret pass";`+"\n")
	bobCfg := write("bob.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=bob\nsasl.password=bob-pw\n")

	var u userJSON
	jsonOut(t, &u, "user", "create", "alice", "--password-file", pwFile, "--iterations", "8192", b)
	if u.User != "alice" || len(u.Credentials) != 1 || u.Credentials[0].Mechanism != "SCRAM-SHA-512" || u.Credentials[0].Iterations != 8192 {
		t.Errorf("create alice: %+v", u)
	}
	ok(t, "", "user", "create", "--entity-name", "bob", "--mechanism", "scram-sha-256", "--password", "bob-pw", b)

	// The credentials authenticate (the metadata reaches the SASL
	// listener shortly after the change is committed).
	var r result
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r = cli(t, "", "topic", "list", "--bootstrap", sasl, "--command-config", aliceCfg, "--timeout", "5s"); r.code == 0 {
			break
		}
	}
	if r.code != 0 {
		t.Fatalf("alice over SASL/SCRAM-SHA-512:\n%s", r)
	}
	ok(t, "", "topic", "list", "--bootstrap", sasl, "--command-config", bobCfg)

	jsonOut(t, &u, "user", "list", b)
	if len(u.Users) != 2 || u.Users[0].User != "alice" || u.Users[1].User != "bob" ||
		u.Users[0].Credentials[0] != (credEntry{"SCRAM-SHA-512", 8192}) || u.Users[1].Credentials[0] != (credEntry{"SCRAM-SHA-256", 4096}) {
		t.Errorf("user list: %+v", u)
	}
	r = ok(t, "", "user", "list", "bob", b)
	if row(r.stdout, "bob", "SCRAM-SHA-256", "4096") == nil || row(r.stdout, "alice") != nil {
		t.Errorf("user list bob:\n%s", r)
	}
	fails(t, 1, "user nobody has no SCRAM credentials", "user", "list", "nobody", b)

	jsonOut(t, &u, "user", "delete", "alice", b)
	if len(u.Deleted) != 1 || u.Deleted[0].User != "alice" || u.Deleted[0].Credentials[0].Mechanism != "SCRAM-SHA-512" {
		t.Errorf("delete alice: %+v", u)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r = cli(t, "", "topic", "list", "--bootstrap", sasl, "--command-config", aliceCfg, "--timeout", "3s"); r.code != 0 {
			break
		}
	}
	if r.code != 1 {
		t.Errorf("alice still authenticates after user delete:\n%s", r)
	}
	fails(t, 1, "user bob has no SCRAM-SHA-512 credential", "user", "delete", "bob", "--mechanism", "SCRAM-SHA-512", b)
	fails(t, 2, "--password or --password-file", "user", "create", "carol", b)
	fails(t, 2, "between 4096 and 16384", "user", "create", "carol", "--password", "x", "--iterations", "100", b)
}
