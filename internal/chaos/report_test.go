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
