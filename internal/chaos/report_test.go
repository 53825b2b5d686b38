package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every fault kind gets a shaded window of its own colour in the report.
func TestReportShadesEveryFaultKind(t *testing.T) {
	r := &Result{}
	for i, k := range append(AllFaults, FaultJepsen2013) {
		r.Timeline = append(r.Timeline, Event{StartMs: float64(i) * 1000, EndMs: float64(i)*1000 + 500, Kind: k, Nodes: []int{1}})
		r.Series = append(r.Series, Bucket{T: i, OK: 10})
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := writeHTML(path, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	if strings.Contains(html, `fill=""`) {
		t.Error("a fault window has no fill colour (SVG would paint it black)")
	}
	for _, k := range append(AllFaults, FaultJepsen2013) {
		if !strings.Contains(html, `fill="`+faultColor(k)+`"`) || faultColor(k) == "#cccccc" {
			t.Errorf("fault %s has no colour of its own", k)
		}
	}
}

// A tiered run's report shows each partition's tiers, and which final
// reads started in the remote log.
func TestReportShowsTiers(t *testing.T) {
	r := &Result{Final: FinalRead{End: map[int32]int64{0: 900, 1: 40}, Start: map[int32]int64{0: 0, 1: 0}}}
	r.Tiered = &TieredState{
		LogStart:       map[int32]int64{0: 0, 1: 0},
		LocalStart:     map[int32]int64{0: 812, 1: 0},
		TieredEnd:      map[int32]int64{0: 811, 1: -1},
		RemoteSegments: map[int32]int{0: 3},
		ReadFromRemote: []int32{0},
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := writeHTML(path, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, want := range []string{
		"<h2>Tiers at the end</h2>",
		"<tr><td>0</td><td>0</td><td>812</td><td>811</td><td>3</td><td>true</td></tr>",
		"<tr><td>1</td><td>0</td><td>0</td><td>-1</td><td>0</td><td>false</td></tr>",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if got := r.Tiered.summary(); !strings.Contains(got, "3 remote segments, 1 of 2 partitions read from the remote log") {
		t.Errorf("summary %q", got)
	}
}
