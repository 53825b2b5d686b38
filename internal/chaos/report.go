package chaos

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Bucket is one second of the send history (by completion time).
type Bucket struct {
	T    int     `json:"t"`
	OK   int     `json:"ok"`
	Fail int     `json:"fail"`
	Info int     `json:"info"`
	P50  float64 `json:"p50Ms"`
	P99  float64 `json:"p99Ms"`
	Max  float64 `json:"maxMs"`
}

func series(sends []Send, span interface{ Seconds() float64 }) []Bucket {
	n := int(math.Ceil(span.Seconds())) + 1
	for _, s := range sends {
		if t := int(s.EndMs / 1000); t+1 > n {
			n = t + 1
		}
	}
	bs := make([]Bucket, n)
	lat := make([][]float64, n)
	for i := range bs {
		bs[i].T = i
	}
	for _, s := range sends {
		t := int(s.EndMs / 1000)
		if t < 0 {
			t = 0
		}
		switch s.Outcome {
		case "ok":
			bs[t].OK++
			lat[t] = append(lat[t], s.EndMs-s.StartMs)
		case "fail":
			bs[t].Fail++
		default:
			bs[t].Info++
		}
	}
	for i, l := range lat {
		if len(l) == 0 {
			continue
		}
		sort.Float64s(l)
		bs[i].P50 = l[len(l)/2]
		bs[i].P99 = l[min(len(l)-1, int(float64(len(l))*0.99))]
		bs[i].Max = l[len(l)-1]
	}
	// Trim the empty tail.
	for len(bs) > 1 && bs[len(bs)-1].OK+bs[len(bs)-1].Fail+bs[len(bs)-1].Info == 0 {
		bs = bs[:len(bs)-1]
	}
	return bs
}

var faultColors = map[string]string{
	FaultKill: "#f4a3a3", FaultPause: "#a3c4f4", FaultIsolate: "#f4d58d", FaultTerm: "#b9e4b0", "heal": "#dddddd", FaultJepsen2013: "#e0b0f0",
	FaultOneWay: "#f7c59f", FaultSplit: "#e8e07a", FaultSlowDisk: "#b8e0e8", FaultDiskFail: "#c9a3f4", FaultDelayTxn: "#f4a3c9",
	FaultObjStore: "#a3e4d7",
}

// faultColor is the shading of a fault window (grey for a kind without one).
func faultColor(kind string) string {
	if c, ok := faultColors[kind]; ok {
		return c
	}
	return "#cccccc"
}

const (
	chartW, chartH = 1000, 230
	padL, padR     = 55, 15
	padT, padB     = 12, 28
)

type chart struct {
	sb   strings.Builder
	tMax float64
}

func (c *chart) x(t float64) float64 {
	return padL + t/c.tMax*float64(chartW-padL-padR)
}

func (c *chart) begin(title string, events []Event) {
	fmt.Fprintf(&c.sb, "<h3>%s</h3>\n<svg width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"11\">\n", html.EscapeString(title), chartW, chartH)
	for i, e := range events {
		x0, x1 := c.x(e.StartMs/1000), c.x(e.EndMs/1000)
		if x1-x0 < 2 {
			x1 = x0 + 2
		}
		fmt.Fprintf(&c.sb, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" opacity=\"0.5\"><title>%s %v %s</title></rect>\n",
			x0, padT, x1-x0, chartH-padT-padB, faultColor(e.Kind), e.Kind, e.Nodes, html.EscapeString(e.Detail))
		// Stagger the labels: short faults follow each other closely.
		fmt.Fprintf(&c.sb, "<text x=\"%.1f\" y=\"%d\" fill=\"#555\">%s%s</text>\n", x0+2, padT+10+(i%3)*11, e.Kind, nodesLabel(e.Nodes))
	}
	// x axis
	y := chartH - padB
	fmt.Fprintf(&c.sb, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", padL, y, chartW-padR, y)
	step := niceStep(c.tMax / 10)
	for t := 0.0; t <= c.tMax; t += step {
		fmt.Fprintf(&c.sb, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/><text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%gs</text>\n", c.x(t), y, c.x(t), y+4, c.x(t), y+16, t)
	}
}

func nodesLabel(ns []int) string {
	if len(ns) == 0 {
		return ""
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return " n" + strings.Join(s, ",")
}

func (c *chart) yAxis(ticks []float64, labels []string, ypos func(float64) float64) {
	fmt.Fprintf(&c.sb, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", padL, padT, padL, chartH-padB)
	for i, v := range ticks {
		y := ypos(v)
		fmt.Fprintf(&c.sb, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", padL, y, chartW-padR, y, padL-4, y+4, labels[i])
	}
}

func (c *chart) line(pts [][2]float64, color, name string, legendIdx int) {
	if len(pts) > 0 {
		var sb strings.Builder
		for _, p := range pts {
			fmt.Fprintf(&sb, "%.1f,%.1f ", p[0], p[1])
		}
		fmt.Fprintf(&c.sb, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n", color, sb.String())
	}
	lx := chartW - padR - 110
	ly := padT + 14 + 14*legendIdx
	fmt.Fprintf(&c.sb, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"3\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n", lx, ly-4, color, lx+14, ly, name)
}

func (c *chart) end() string {
	c.sb.WriteString("</svg>\n")
	return c.sb.String()
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func throughputChart(bs []Bucket, events []Event, tMax float64) string {
	c := &chart{tMax: tMax}
	c.begin("Sends completed per second (by outcome)", events)
	maxV := 1.0
	for _, b := range bs {
		maxV = math.Max(maxV, float64(max(b.OK, b.Fail, b.Info)))
	}
	step := niceStep(maxV / 5)
	top := math.Ceil(maxV/step) * step
	ypos := func(v float64) float64 { return float64(chartH-padB) - v/top*float64(chartH-padT-padB) }
	var ticks []float64
	var labels []string
	for v := 0.0; v <= top; v += step {
		ticks, labels = append(ticks, v), append(labels, fmt.Sprintf("%g", v))
	}
	c.yAxis(ticks, labels, ypos)
	for i, s := range []struct {
		name, color string
		get         func(Bucket) int
	}{{"ok", "#2a7a2a", func(b Bucket) int { return b.OK }}, {"fail", "#c02020", func(b Bucket) int { return b.Fail }}, {"info", "#e08000", func(b Bucket) int { return b.Info }}} {
		var pts [][2]float64
		for _, b := range bs {
			pts = append(pts, [2]float64{c.x(float64(b.T) + 0.5), ypos(float64(s.get(b)))})
		}
		c.line(pts, s.color, s.name, i)
	}
	return c.end()
}

func latencyChart(bs []Bucket, events []Event, tMax float64) string {
	c := &chart{tMax: tMax}
	c.begin("Acknowledged send latency (ms, log scale, by completion second)", events)
	maxV := 10.0
	for _, b := range bs {
		maxV = math.Max(maxV, b.Max)
	}
	lo, hi := 0.0, math.Ceil(math.Log10(maxV))
	ypos := func(v float64) float64 {
		l := math.Log10(math.Max(v, 1))
		return float64(chartH-padB) - (l-lo)/(hi-lo)*float64(chartH-padT-padB)
	}
	var ticks []float64
	var labels []string
	for e := lo; e <= hi; e++ {
		ticks, labels = append(ticks, math.Pow(10, e)), append(labels, fmt.Sprintf("%g", math.Pow(10, e)))
	}
	c.yAxis(ticks, labels, ypos)
	for i, s := range []struct {
		name, color string
		get         func(Bucket) float64
	}{{"p50", "#1f5fbf", func(b Bucket) float64 { return b.P50 }}, {"p99", "#8a2be2", func(b Bucket) float64 { return b.P99 }}, {"max", "#999", func(b Bucket) float64 { return b.Max }}} {
		var pts [][2]float64
		for _, b := range bs {
			if b.OK > 0 {
				pts = append(pts, [2]float64{c.x(float64(b.T) + 0.5), ypos(s.get(b))})
			}
		}
		c.line(pts, s.color, s.name, i)
	}
	return c.end()
}

// RenderReport writes report.html in dir again from the run's
// results.json (e.g. after the report's layout changed).
func RenderReport(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s/results.json: %w", dir, err)
	}
	return writeHTML(filepath.Join(dir, "report.html"), &r)
}

func writeHTML(path string, r *Result) error {
	var sb strings.Builder
	esc := html.EscapeString
	verdict := "PASS: no anomalies"
	color := "#2a7a2a"
	if r.Anomalies() > 0 {
		verdict, color = fmt.Sprintf("FAIL: %d anomalies", r.Anomalies()), "#c02020"
	} else if len(r.Crashes) > 0 {
		verdict, color = fmt.Sprintf("FAIL: %d broker crashes", len(r.Crashes)), "#c02020"
	} else if !r.Valid {
		verdict, color = "UNKNOWN: the run could not check everything (see notes)", "#e08000"
	}
	cfg := r.Config
	fmt.Fprintf(&sb, `<!DOCTYPE html><html><head><meta charset="utf-8"><title>sluice-chaos seed %d</title>
<style>body{font-family:sans-serif;margin:20px;max-width:1060px}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left;vertical-align:top}th{background:#f4f4f4}code{background:#f4f4f4;padding:1px 3px}.ex{font-family:monospace;font-size:12px}</style></head><body>
<h1>sluice-chaos</h1><h2 style="color:%s">%s</h2>
`, cfg.Seed, color, esc(verdict))
	fmt.Fprintf(&sb, "<p>%d nodes, %.0fs, seed %d, min.insync.replicas=%d, unclean.leader.election.enable=%v, faults %s, %d partitions (RF %d), %d producers, %d consumers, target %g sends/s. Started %s, took %.0fs.</p>\n",
		cfg.Nodes, cfg.DurationS, cfg.Seed, cfg.MinISR, cfg.Unclean, esc(faultsLabel(cfg.Faults, cfg.Scenario)), cfg.Partitions, min(3, cfg.Nodes), cfg.Producers, cfg.Consumers, cfg.Rate, r.Started.Format("2006-01-02 15:04:05"), r.ElapsedS)
	fmt.Fprintf(&sb, "<p>Replay: <code>go run ./cmd/sluice-chaos %s --out DIR</code></p>\n", esc(cfg.ReplayFlags))
	fmt.Fprintf(&sb, "<p>Sends: %d (ok %d, fail %d, indeterminate %d); records polled by consumers: %d; final read: %d records. Kafka plane proxied: %v.</p>\n",
		r.Stats.Sends, r.Stats.OK, r.Stats.Fail, r.Stats.Info, r.Stats.Reads, r.Stats.FinalRead, r.KafkaPlaneProxied)
	if ts := r.TxnStats; ts != nil {
		fmt.Fprintf(&sb, "<p>Transactional workload (read_committed; sends above are the transactions' values): %d transactions, %d committed, %d aborted (%d on purpose, %d after a produce or commit error), %d indeterminate; %d values read inside transactions, %d write-read dependencies between them (checked for G1c).</p>\n",
			ts.Txns, ts.Committed, ts.Aborted, ts.AbortIntended, ts.Aborted-ts.AbortIntended, ts.Info, ts.Reads, ts.ReadDeps)
	}
	if len(r.Notes)+len(r.Crashes) > 0 {
		sb.WriteString("<ul>")
		for _, n := range r.Crashes {
			fmt.Fprintf(&sb, "<li style=\"color:#c02020\">crash: %s</li>", esc(n))
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&sb, "<li>%s</li>", esc(n))
		}
		sb.WriteString("</ul>\n")
	}
	tMax := cfg.DurationS
	if len(r.Series) > 0 {
		tMax = math.Max(tMax, float64(r.Series[len(r.Series)-1].T+1))
	}
	for _, e := range r.Timeline {
		tMax = math.Max(tMax, e.EndMs/1000)
	}
	sb.WriteString(throughputChart(r.Series, r.Timeline, tMax))
	sb.WriteString(latencyChart(r.Series, r.Timeline, tMax))

	sb.WriteString("<h2>Anomalies</h2><table><tr><th>anomaly</th><th>count</th><th>first examples</th></tr>\n")
	if r.Analysis != nil {
		for _, k := range r.Analysis.Kinds() {
			n := r.Analysis.Counts[k]
			st := ""
			if n > 0 {
				st = ` style="color:#c02020;font-weight:bold"`
			}
			fmt.Fprintf(&sb, "<tr><td%s>%s</td><td%s>%d</td><td class=\"ex\">", st, k, st, n)
			for _, e := range r.Analysis.Examples[k] {
				fmt.Fprintf(&sb, "%s<br>", esc(e))
			}
			sb.WriteString("</td></tr>\n")
		}
	}
	sb.WriteString("</table>\n")

	sb.WriteString("<h2>Fault timeline</h2><table><tr><th>start</th><th>end</th><th>fault</th><th>nodes</th><th>detail</th><th>error</th></tr>\n")
	for _, e := range r.Timeline {
		fmt.Fprintf(&sb, "<tr><td>%.2fs</td><td>%.2fs</td><td style=\"background:%s\">%s</td><td>%v</td><td>%s</td><td>%s</td></tr>\n",
			e.StartMs/1000, e.EndMs/1000, faultColor(e.Kind), esc(e.Kind), e.Nodes, esc(e.Detail), esc(e.Err))
	}
	sb.WriteString("</table>\n<h2>Schedule</h2><ol>")
	for _, f := range r.Schedule {
		fmt.Fprintf(&sb, "<li>%s</li>", esc(f.String()))
	}
	sb.WriteString("</ol>\n<h2>Final read</h2><table><tr><th>partition</th><th>log start</th><th>high watermark</th><th>complete</th></tr>")
	var ps []int
	for p := range r.Final.End {
		ps = append(ps, int(p))
	}
	sort.Ints(ps)
	for _, p := range ps {
		fmt.Fprintf(&sb, "<tr><td>%d</td><td>%d</td><td>%d</td><td>%v</td></tr>", p, r.Final.Start[int32(p)], r.Final.End[int32(p)], r.Final.Complete[int32(p)])
	}
	sb.WriteString("</table>\n")
	if ts := r.Tiered; ts != nil {
		sb.WriteString("<h2>Tiers at the end</h2><table><tr><th>partition</th><th>log start</th><th>local log start</th><th>tiered end</th><th>remote segments</th><th>final read from remote</th></tr>")
		for _, p := range ps {
			q := int32(p)
			fmt.Fprintf(&sb, "<tr><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%v</td></tr>", p, ts.LogStart[q], ts.LocalStart[q], ts.TieredEnd[q], ts.RemoteSegments[q], slices.Contains(ts.ReadFromRemote, q))
		}
		sb.WriteString("</table>\n")
		if ts.Err != "" {
			fmt.Fprintf(&sb, "<p>%s</p>\n", esc(ts.Err))
		}
	}
	if len(r.Stats.FailErrs) > 0 {
		sb.WriteString("<h2>Send errors</h2><table><tr><th>outcome: error</th><th>count</th></tr>")
		for _, k := range sortedKeys(r.Stats.FailErrs) {
			fmt.Fprintf(&sb, "<tr><td class=\"ex\">%s</td><td>%d</td></tr>", esc(k), r.Stats.FailErrs[k])
		}
		sb.WriteString("</table>\n")
	}
	if len(r.PollErrors) > 0 {
		sb.WriteString("<h2>Consumer errors</h2><table><tr><th>error</th><th>count</th></tr>")
		for _, k := range sortedKeys(r.PollErrors) {
			fmt.Fprintf(&sb, "<tr><td class=\"ex\">%s</td><td>%d</td></tr>", esc(k), r.PollErrors[k])
		}
		sb.WriteString("</table>\n")
	}
	sb.WriteString("<h2>Node logs</h2><ul>")
	for _, l := range r.Logs {
		fmt.Fprintf(&sb, "<li><code>%s</code></li>", esc(l))
	}
	sb.WriteString("</ul></body></html>\n")
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

func faultsLabel(f []string, scenario string) string {
	if scenario != "" {
		return "scenario " + scenario
	}
	if len(f) == 0 {
		return "none"
	}
	return strings.Join(f, ",")
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] || m[ks[i]] == m[ks[j]] && ks[i] < ks[j] })
	return ks
}
