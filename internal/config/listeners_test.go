package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestKafkaListeners checks listeners, listener.security.protocol.map,
// advertised.listeners and inter.broker.listener.name together, and that
// --listen (Listen) replaces the PLAINTEXT entry or the first one.
func TestKafkaListeners(t *testing.T) {
	cases := []struct {
		name   string
		listen string // Listen after the file (as --listen would set it); "" keeps the file's
		props  map[string]string
		want   string // NAME=addr/PROTO,... as KafkaListeners
		adv    string // NAME=addr,... as AdvertisedListeners; "" skips
		inter  string
		err    string
	}{
		{name: "default", props: nil, want: "PLAINTEXT=127.0.0.1:9092/PLAINTEXT", inter: "PLAINTEXT"},
		{name: "several", props: map[string]string{"listeners": "SSL://:9093,PLAINTEXT://:9092,CONTROLLER://:9094,sasl_ssl://h:9095"},
			want: "SSL=:9093/SSL,PLAINTEXT=:9092/PLAINTEXT,SASL_SSL=h:9095/SASL_SSL", inter: "PLAINTEXT"},
		{name: "listen replaces PLAINTEXT", listen: "127.0.0.1:7000", props: map[string]string{"listeners": "SSL://:9093,PLAINTEXT://:9092"},
			want: "SSL=:9093/SSL,PLAINTEXT=127.0.0.1:7000/PLAINTEXT", inter: "PLAINTEXT"},
		{name: "listen replaces the first", listen: "127.0.0.1:7000", props: map[string]string{"listeners": "SSL://:9093,SASL_SSL://:9092"},
			want: "SSL=127.0.0.1:7000/SSL,SASL_SSL=:9092/SASL_SSL", inter: "SSL"},
		{name: "custom names", props: map[string]string{"listeners": "EXTERNAL://:9092,INTERNAL://:9093",
			"listener.security.protocol.map": "EXTERNAL:SASL_SSL,INTERNAL:SSL,CONTROLLER:PLAINTEXT", "inter.broker.listener.name": "internal",
			"advertised.listeners": "EXTERNAL://kafka.example.com:443"},
			want: "EXTERNAL=:9092/SASL_SSL,INTERNAL=:9093/SSL", adv: "EXTERNAL=kafka.example.com:443,INTERNAL=:9093", inter: "INTERNAL"},
		{name: "security.inter.broker.protocol", props: map[string]string{"listeners": "PLAINTEXT://:9092,SSL://:9093", "security.inter.broker.protocol": "SSL"},
			want: "PLAINTEXT=:9092/PLAINTEXT,SSL=:9093/SSL", inter: "SSL"},
		{name: "no protocol", props: map[string]string{"listeners": "EXTERNAL://:9092"}, err: "no security protocol for listener EXTERNAL"},
		{name: "same port", props: map[string]string{"listeners": "PLAINTEXT://:9092,SSL://127.0.0.1:9092"}, err: "same port 9092"},
		{name: "advertised unknown", props: map[string]string{"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:1"}, err: "advertised.listeners: SSL is not a listener"},
		{name: "inter unknown", props: map[string]string{"listeners": "PLAINTEXT://:9092", "inter.broker.listener.name": "SSL"}, err: "inter.broker.listener.name: SSL is not a listener"},
		{name: "controller SASL", props: map[string]string{"listener.security.protocol.map": "CONTROLLER:SASL_SSL,PLAINTEXT:PLAINTEXT"}, err: "controller listener serves PLAINTEXT or SSL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sb strings.Builder
			for k, v := range c.props {
				sb.WriteString(k + "=" + v + "\n")
			}
			path := filepath.Join(t.TempDir(), "server.properties")
			if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			b := Defaults()
			if err := b.LoadFile(path); err != nil {
				t.Fatal(err)
			}
			if c.listen != "" {
				b.Listen = c.listen
			}
			err := b.CheckListeners()
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("CheckListeners = %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ls, _ := b.KafkaListeners()
			var got []string
			for _, l := range ls {
				got = append(got, l.Name+"="+l.Addr+"/"+l.Protocol)
			}
			if g := strings.Join(got, ","); g != c.want {
				t.Errorf("KafkaListeners = %s, want %s", g, c.want)
			}
			if c.adv != "" {
				adv, _ := b.AdvertisedListeners()
				got = got[:0]
				for _, l := range adv {
					got = append(got, l.Name+"="+l.Addr)
				}
				if g := strings.Join(got, ","); g != c.adv {
					t.Errorf("AdvertisedListeners = %s, want %s", g, c.adv)
				}
			}
			if inter, _ := b.InterBrokerListenerName(); inter != c.inter {
				t.Errorf("InterBrokerListenerName = %s, want %s", inter, c.inter)
			}
		})
	}
}

// TestSecurityProtocolMapDefault is Kafka's default map.
func TestSecurityProtocolMapDefault(t *testing.T) {
	got := Defaults().SecurityProtocolMap()
	want := map[string]string{"CONTROLLER": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SecurityProtocolMap = %v, want %v", got, want)
	}
}
