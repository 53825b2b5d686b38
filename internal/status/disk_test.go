package status_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-io/sluice/internal/status"
	"github.com/sluice-io/sluice/internal/vfs"
)

func TestDiskFaultEndpoint(t *testing.T) {
	b := openBroker(t)

	// Without fault injection the endpoint does not exist.
	off := httptest.NewServer(status.WithDiskFaults(newServer(t, b).Handler(), nil))
	defer off.Close()
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequest(m, off.URL+"/debug/disk?mode=fail", nil)
		resp, err := off.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s /debug/disk without fault injection: %s, want 404", m, resp.Status)
		}
	}

	d := vfs.NewDiskFaults(b.Config().DataDir)
	srv := httptest.NewServer(status.WithDiskFaults(newServer(t, b).Handler(), d))
	defer srv.Close()
	call := func(method, query string) (int, status.DiskState) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+"/debug/disk"+query, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// Read to the end: the switch happens before the body ends.
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var st status.DiskState
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, st
	}
	for _, c := range []struct {
		method, query string
		code          int
		want          status.DiskState
	}{
		{"GET", "", 200, status.DiskState{Mode: "ok"}},
		{"POST", "?mode=slow&delay=200ms", 200, status.DiskState{Mode: "slow", DelayMs: 200}},
		{"GET", "", 200, status.DiskState{Mode: "slow", DelayMs: 200}},
		{"POST", "?mode=slow&delay=150", 200, status.DiskState{Mode: "slow", DelayMs: 150}},
		{"POST", "?mode=slow&delay=1m", 200, status.DiskState{Mode: "slow", DelayMs: 10000}},
		{"POST", "?mode=slow", 400, status.DiskState{}},
		{"POST", "?mode=slow&delay=-1s", 400, status.DiskState{}},
		{"POST", "?mode=broken", 400, status.DiskState{}},
		{"POST", "?mode=fail", 200, status.DiskState{Mode: "fail"}},
		{"PUT", "?mode=ok", 405, status.DiskState{}},
		{"POST", "?mode=ok", 200, status.DiskState{Mode: "ok"}},
	} {
		code, st := call(c.method, c.query)
		st.Fired = 0
		if code != c.code || st != c.want {
			t.Errorf("%s /debug/disk%s: %d %+v, want %d %+v", c.method, c.query, code, st, c.code, c.want)
		}
	}
	// The rest of the HTTP API is still there.
	resp, err := srv.Client().Get(srv.URL + "/api/v1/partitions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/v1/partitions behind the disk switch: %s", resp.Status)
	}
}
