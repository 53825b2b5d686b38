package admin

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	got, err := parseJAAS(`org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="p@ss \"q\" w=1;";`)
	if err != nil || got["username"] != "alice" || got["password"] != `p@ss "q" w=1;` {
		t.Errorf("quoted: %v %v", got, err)
	}
	got, err = parseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required username=bob password=secret;`)
	if err != nil || got["username"] != "bob" || got["password"] != "secret" {
		t.Errorf("unquoted: %v %v", got, err)
	}
	for _, bad := range []string{`PlainLoginModule`, `PlainLoginModule maybe username="a";`, `PlainLoginModule required username="a"`} {
		if _, err := parseJAAS(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

// TestSASLMechanism: the mechanism named by sasl.mechanism, with the
// credentials of the JAAS configuration (or sasl.username/password), is
// what the client sends: PLAIN's first message carries them, SCRAM's
// names the user.
func TestSASLMechanism(t *testing.T) {
	for _, c := range []struct {
		props     map[string]string
		name      string
		firstHas  string
		errSubstr string
	}{
		{map[string]string{"sasl.mechanism": "PLAIN", "sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`},
			"PLAIN", "\x00alice\x00alice-secret", ""},
		{map[string]string{"sasl.mechanism": "plain", "sasl.username": "bob", "sasl.password": "pw"}, "PLAIN", "\x00bob\x00pw", ""},
		{map[string]string{"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" password="x";`},
			"SCRAM-SHA-256", "n=carol,", ""},
		{map[string]string{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dave", "sasl.password": "y"}, "SCRAM-SHA-512", "n=dave,", ""},
		{map[string]string{"sasl.username": "eve"}, "", "", "sasl.mechanism=GSSAPI is not supported"},
		{map[string]string{"sasl.mechanism": "OAUTHBEARER", "sasl.username": "eve"}, "", "", "OAUTHBEARER is not supported"},
		{map[string]string{"sasl.mechanism": "PLAIN"}, "", "", "needs a username"},
		{map[string]string{"sasl.mechanism": "PLAIN", "sasl.jaas.config": "broken"}, "", "", "sasl.jaas.config"},
	} {
		m, err := saslMechanism(c.props)
		if c.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSubstr) {
				t.Errorf("%v: %v, want %q", c.props, err, c.errSubstr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", c.props, err)
			continue
		}
		if m.Name() != c.name {
			t.Errorf("%v: mechanism %s", c.props, m.Name())
		}
		_, first, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
		if err != nil || !strings.Contains(string(first), c.firstHas) {
			t.Errorf("%v: first message %q (%v), want it to contain %q", c.props, first, err, c.firstHas)
		}
	}
}

func TestClientOpts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		props string
		n     int // options
		err   string
	}{
		{"", 0, ""},
		{"security.protocol=PLAINTEXT\nclient.id=ops\n", 1, ""},
		{"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.password=b\n", 1, ""},
		{"security.protocol=SSL\n", 1, ""}, // the system's CAs
		{"security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=" + write("ts.jks", "x") + "\n", 0, "PEM trust stores only"},
		{"security.protocol=SSL\nssl.truststore.location=" + write("empty.pem", "no pem here") + "\n", 0, "no PEM block"},
		{"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", 0, "needs a username"},
		{"security.protocol=KERBEROS\n", 0, "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"},
	} {
		path := write("client.properties", c.props)
		opts, err := loadCommandConfig(path)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "--command-config "+path) || strings.Contains(err.Error(), "listener "+clientListener) {
				t.Errorf("%q: %v, want %q", c.props, err, c.err)
			}
			continue
		}
		if err != nil || len(opts) != c.n {
			t.Errorf("%q: %d options, %v", c.props, len(opts), err)
		}
	}
	if _, err := loadCommandConfig(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--command-config") {
		t.Errorf("missing file: %v", err)
	}
}

// TestParseFlags: flags after positional arguments, "--", --help and
// parse errors (usage errors, exit 2).
func TestParseFlags(t *testing.T) {
	c := &cli{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard}
	fs, o := c.newFlags("x", "USAGE")
	n := fs.Int("n", 0, "")
	var cfgs stringList
	fs.Var(&cfgs, "config", "")
	pos, err := o.parseFlags(fs, []string{"a", "--n", "3", "b", "--config", "k=v", "--json", "--config=k2=v2", "--", "--c"})
	if err != nil || strings.Join(pos, " ") != "a b --c" || *n != 3 || !o.json || strings.Join(cfgs, " ") != "k=v k2=v2" {
		t.Errorf("pos %q n %d json %v configs %q err %v", pos, *n, o.json, cfgs, err)
	}
	fs, o = c.newFlags("x", "USAGE")
	_, err = o.parseFlags(fs, []string{"--nope"})
	var ue *usageError
	if !errors.As(err, &ue) || ue.usage != "USAGE" {
		t.Errorf("unknown flag: %v", err)
	}
	fs, o = c.newFlags("x", "USAGE")
	if _, err := o.parseFlags(fs, []string{"--timeout", "-1s"}); !errors.As(err, &ue) {
		t.Errorf("negative timeout: %v", err)
	}
	fs, o = c.newFlags("x", "USAGE")
	if _, err := o.parseFlags(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	if err := c.subcommand("g", "U", nil, nil); !errors.As(err, &ue) {
		t.Errorf("no subcommand: %v", err)
	}
	if err := c.subcommand("g", "U", []string{"zap"}, map[string]func([]string) error{}); !errors.As(err, &ue) || !strings.Contains(err.Error(), `unknown subcommand "zap"`) {
		t.Errorf("unknown subcommand: %v", err)
	}
	if _, _, err := parseKV("U", []string{"a=1", "a=2"}); err == nil {
		t.Error("a key given twice was accepted")
	}
	if _, ps, err := topicPartitions("t:0,2"); err != nil || len(ps) != 2 {
		t.Errorf("t:0,2: %v %v", ps, err)
	}
	if _, _, err := topicPartitions("t:x"); err == nil {
		t.Error("t:x accepted")
	}
}

// TestAddConfigList: kafka-configs.sh's --add-config format, a bracketed
// value keeping its commas, and --delete-config's comma list.
func TestAddConfigList(t *testing.T) {
	var l stringList
	a := addConfigList{&l}
	if err := a.Set("a=1,b=[x,y],c=[]"); err != nil {
		t.Fatal(err)
	}
	a.Set("d=2")
	if got := strings.Join(l, " "); got != "a=1 b=x,y c= d=2" {
		t.Errorf("--add-config items: %q", got)
	}
	var d stringList
	commaList{&d}.Set("k1, k2,")
	commaList{&d}.Set("k3")
	if got := strings.Join(d, " "); got != "k1 k2 k3" {
		t.Errorf("--delete-config items: %q", got)
	}
}

// TestMaxRequestSize: max.request.size's default (Kafka's), its bounds,
// and the write limit raised with it beyond kgo's 100 MiB default; the
// record size estimate is Kafka's upper bound.
func TestMaxRequestSize(t *testing.T) {
	if n, opts, err := maxRequestSize(map[string]string{}); err != nil || n != 1048576 || len(opts) != 1 {
		t.Errorf("default: %d %d %v", n, len(opts), err)
	}
	if n, opts, err := maxRequestSize(map[string]string{"max.request.size": " 4194304 "}); err != nil || n != 4194304 || len(opts) != 1 {
		t.Errorf("4194304: %d %d %v", n, len(opts), err)
	}
	if n, opts, err := maxRequestSize(map[string]string{"max.request.size": "209715200"}); err != nil || n != 209715200 || len(opts) != 2 {
		t.Errorf("200 MiB: %d %d %v", n, len(opts), err)
	}
	for _, v := range []string{"100", "x", "2147483647"} {
		if _, _, err := maxRequestSize(map[string]string{"max.request.size": v}); err == nil {
			t.Errorf("max.request.size=%s accepted", v)
		}
	}
	if _, err := clientOpts(map[string]string{"max.request.size": "x"}); err == nil || !strings.Contains(err.Error(), "max.request.size") {
		t.Errorf("clientOpts with a bad max.request.size: %v", err)
	}
	if n := recordSizeUpperBound(&kgo.Record{Key: []byte("k"), Value: make([]byte, 100)}); n != 61+21+101 {
		t.Errorf("recordSizeUpperBound: %d", n)
	}
}
