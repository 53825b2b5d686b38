package metadata

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestBrokerRecordCompat: a registration written before endpoints existed
// (one Host and Port) still loads, and answers every listener name with
// them; a new one answers only its own listeners.
func TestBrokerRecordCompat(t *testing.T) {
	var old Broker
	if err := json.Unmarshal([]byte(`{"id":2,"host":"h2","port":9092,"epoch":7}`), &old); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "PLAINTEXT", "SASL_SSL"} {
		if e, ok := old.Endpoint(name); !ok || e.Host != "h2" || e.Port != 9092 {
			t.Errorf("old record: Endpoint(%q) = %+v, %v", name, e, ok)
		}
	}
	nb := Broker{ID: 3, Host: "i", Port: 2, Endpoints: []Endpoint{
		{Name: "PLAINTEXT", Host: "p", Port: 1, Protocol: "PLAINTEXT"}, {Name: "INTERNAL", Host: "i", Port: 2, Protocol: "SSL"}}}
	b, err := json.Marshal(nb)
	if err != nil {
		t.Fatal(err)
	}
	var back Broker
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Equal(nb) {
		t.Fatalf("round trip: %+v != %+v", back, nb)
	}
	if e, ok := back.Endpoint("internal"); !ok || e.Host != "i" || e.Port != 2 || e.Protocol != "SSL" {
		t.Errorf("Endpoint(internal) = %+v, %v", e, ok)
	}
	if _, ok := back.Endpoint("SASL_SSL"); ok {
		t.Error("Endpoint(SASL_SSL) found on a broker without that listener")
	}
	if e, _ := back.Endpoint(""); e.Host != "i" {
		t.Errorf(`Endpoint("") = %+v, want the inter-broker Host/Port`, e)
	}
	other := back
	other.Endpoints = append([]Endpoint(nil), back.Endpoints...)
	other.Endpoints[0].Port = 9
	if back.Equal(other) {
		t.Error("Equal ignores endpoints")
	}
}

// TestBrokerEqualCoversFields fails when a field is added to Broker
// without being compared by Equal.
func TestBrokerEqualCoversFields(t *testing.T) {
	if n := reflect.TypeOf(Broker{}).NumField(); n != 12 {
		t.Fatalf("Broker has %d fields: update Broker.Equal and this count", n)
	}
}
