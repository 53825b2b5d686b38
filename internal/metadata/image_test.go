package metadata

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBrokerHTTPAddressIsOptional: a broker registered before the HTTP
// field existed decodes with no address, and a broker without one writes
// no field, so metadata logs stay readable both ways.
func TestBrokerHTTPAddressIsOptional(t *testing.T) {
	var old Broker
	if err := json.Unmarshal([]byte(`{"id":2,"host":"10.0.0.2","port":9092,"epoch":7}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.HTTP != "" || old.ID != 2 || old.Port != 9092 {
		t.Fatalf("%+v", old)
	}
	b, _ := json.Marshal(old)
	if strings.Contains(string(b), "http") {
		t.Fatalf("empty address encoded: %s", b)
	}
	old.HTTP = "10.0.0.2:9094"
	b, _ = json.Marshal(old)
	var back Broker
	if err := json.Unmarshal(b, &back); err != nil || back.HTTP != "10.0.0.2:9094" {
		t.Fatalf("%s -> %+v %v", b, back, err)
	}
}
