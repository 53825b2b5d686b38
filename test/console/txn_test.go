package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/status"
	"github.com/sluice-io/sluice/internal/testcluster"
	"github.com/sluice-io/sluice/internal/testproc"
)

// TestConsoleOpenTransaction leaves a transaction open on a one-node
// cluster and checks that the console shows it: in /api/v1/cluster and
// /api/v1/transactions with its partitions, in the summary (internal
// topics counted apart), in the page as headless Chromium renders it, and
// that the page at 1400 px wide has no horizontal overflow.
func TestConsoleOpenTransaction(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Nodes: 1, Props: map[string]string{
		"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1",
		"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "2"}})
	c.CreateTopic(topic, 2, 1, nil, nil)
	const txnID = "invoice-writer-7"
	cl := c.Client(kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i), Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Left open: no EndTransaction until the checks are done.
	n := c.Node(1)
	var v *status.ClusterView
	testcluster.WaitFor(t, 20*time.Second, "the open transaction in /api/v1/cluster", func() (bool, string) {
		var err error
		if v, err = clusterView(n); err != nil {
			return false, err.Error()
		}
		i := slices.IndexFunc(v.Transactions, func(tv status.TransactionView) bool { return tv.TransactionalID == txnID })
		if i < 0 {
			return false, fmt.Sprintf("transactions %+v", v.Transactions)
		}
		tv := v.Transactions[i]
		want := []string{topic + "/0", topic + "/1"}
		if tv.State != "Ongoing" || tv.Coordinator != 1 || tv.ProducerID < 0 || !slices.Equal(tv.Partitions, want) || tv.StartedMs <= 0 || tv.TimeoutMs <= 0 {
			return false, fmt.Sprintf("transaction %+v, want Ongoing on %v coordinated by 1", tv, want)
		}
		return true, ""
	})
	if v.Summary.Topics != 1 || v.Summary.InternalTopics != 1 {
		t.Errorf("summary counts %d topics, %d internal; want 1 and __transaction_state apart", v.Summary.Topics, v.Summary.InternalTopics)
	}
	var txns []status.TransactionView
	getJSON(t, "http://"+n.HTTPAddr()+"/api/v1/transactions", &txns)
	if !slices.ContainsFunc(txns, func(tv status.TransactionView) bool { return tv.TransactionalID == txnID }) {
		t.Errorf("/api/v1/transactions = %+v, lacks %s", txns, txnID)
	}
	var eps []status.Endpoint
	getJSON(t, "http://"+n.HTTPAddr()+"/api/v1/", &eps)
	for _, want := range []string{"/api/v1/cluster", "/api/v1/transactions", "/api/v1/node"} {
		if !slices.ContainsFunc(eps, func(e status.Endpoint) bool { return e.Path == want && e.Description != "" }) {
			t.Errorf("/api/v1/ = %+v, lacks %s", eps, want)
		}
	}

	chromium := testproc.RequireTool(t, "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
	if chromium == "" {
		return
	}
	dom, w := measuredDOM(t, chromium, n.HTTPAddr())
	for _, want := range []string{txnID, "Ongoing", "<span>" + topic + "/0</span><span>" + topic + "/1</span>", "open transactions"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered console lacks %q", want)
		}
	}
	if strings.Contains(dom, "no transaction coordinator") {
		t.Error("rendered console still says sluice has no transaction coordinator")
	}
	if w > 1400 {
		t.Errorf("the console is %d px wide in a 1400 px window: its tables do not fit", w)
	}
	screenshot(t, chromium, "http://"+n.HTTPAddr()+"/status", screenshotDir(t), "console-transaction.png")

	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 20*time.Second, "the aborted transaction gone from /api/v1/cluster", func() (bool, string) {
		v, err := clusterView(n)
		if err != nil {
			return false, err.Error()
		}
		return len(v.Transactions) == 0, fmt.Sprintf("transactions %+v", v.Transactions)
	})
}

// getJSON decodes GET url into out.
func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// measuredDOM renders the node's console in Chromium (1400 px wide) and
// returns the DOM and the document's scroll width in pixels.
func measuredDOM(t *testing.T, chromium, nodeAddr string) (string, int) {
	t.Helper()
	dom := dumpDOM(t, chromium, measuredPage(t, nodeAddr))
	m := regexp.MustCompile(`data-scroll-width="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the page's width was not measured")
	}
	w, _ := strconv.Atoi(m[1])
	t.Logf("the console is %d px wide in a 1400 px window", w)
	return dom, w
}

// measuredPage serves the node's console with a test script appended that,
// once the page has rendered, records the document's scroll width on the
// body (data-scroll-width), so that a DOM dump shows whether the page
// overflows the window; every other path goes to the node.
func measuredPage(t *testing.T, nodeAddr string) string {
	t.Helper()
	page := readPage(t, "http://"+nodeAddr+"/status")
	page = strings.Replace(page, "</body>", `<script>setTimeout(() => document.body.setAttribute("data-scroll-width",
  String(document.documentElement.scrollWidth)), 1500);</script></body>`, 1)
	node := "http://" + nodeAddr
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, page)
			return
		}
		resp, err := httpClient.Get(node + r.URL.RequestURI())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/status"
}
