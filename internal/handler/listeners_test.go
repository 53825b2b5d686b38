package handler_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/protocol"
)

// TestListenerEndpoints: Metadata, DescribeCluster and FindCoordinator
// answer with the broker's endpoints on the listener the request came in
// on (advertised.listeners by name); on a listener the broker has not
// registered, the broker is left out and the coordinator is not available.
func TestListenerEndpoints(t *testing.T) {
	var lns []net.Listener
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	port := func(i int) int32 { return int32(lns[i].Addr().(*net.TCPAddr).Port) }
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Listen = lns[0].Addr().String()
	cfg.Props["listeners"] = "PLAINTEXT://" + lns[0].Addr().String() + ",INTERNAL://" + lns[1].Addr().String()
	cfg.Props["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
	cfg.Props["advertised.listeners"] = "INTERNAL://internal.example:" + strconv.Itoa(int(port(1)))
	cfg.Props["offsets.topic.replication.factor"] = "1"
	cfg.Props["offsets.topic.num.partitions"] = "1"
	b, err := broker.Open(broker.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	reg := protocol.NewRegistry()
	hs := handler.Register(reg, b)
	srv := protocol.NewServer(protocol.Config{}, reg)
	go srv.ServeListener(lns[0], protocol.Listener{Name: "PLAINTEXT"})
	go srv.ServeListener(lns[1], protocol.Listener{Name: "INTERNAL"})
	go srv.ServeListener(lns[2], protocol.Listener{Name: "OTHER"}) // not registered by the broker
	t.Cleanup(func() { srv.Close(); hs.Close(); b.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ask := func(i int, req kmsg.Request) kmsg.Response {
		t.Helper()
		cl := protocol.NewClient(lns[i].Addr().String(), "test")
		defer cl.Close()
		resp, err := cl.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct {
		ln   int
		host string
		port int32
	}{{0, "127.0.0.1", port(0)}, {1, "internal.example", port(1)}, {2, "", 0}} {
		md := kmsg.NewPtrMetadataRequest()
		md.SetVersion(9)
		mresp := ask(c.ln, md).(*kmsg.MetadataResponse)
		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.SetVersion(0)
		dresp := ask(c.ln, dc).(*kmsg.DescribeClusterResponse)
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.SetVersion(3)
		fc.CoordinatorKey = "g"
		var fresp *kmsg.FindCoordinatorResponse
		for i := 0; ; i++ { // the offsets topic's leader takes a moment
			fresp = ask(c.ln, fc).(*kmsg.FindCoordinatorResponse)
			if fresp.ErrorCode == 0 || c.host == "" || i == 50 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if c.host == "" {
			if len(mresp.Brokers) != 0 || len(dresp.Brokers) != 0 {
				t.Errorf("listener OTHER: brokers %+v / %+v, want none", mresp.Brokers, dresp.Brokers)
			}
			if fresp.ErrorCode != 15 { // COORDINATOR_NOT_AVAILABLE
				t.Errorf("listener OTHER: FindCoordinator error %d, want 15", fresp.ErrorCode)
			}
			continue
		}
		if len(mresp.Brokers) != 1 || mresp.Brokers[0].Host != c.host || mresp.Brokers[0].Port != c.port {
			t.Errorf("listener %d: Metadata brokers %+v, want %s:%d", c.ln, mresp.Brokers, c.host, c.port)
		}
		if len(dresp.Brokers) != 1 || dresp.Brokers[0].Host != c.host || dresp.Brokers[0].Port != c.port {
			t.Errorf("listener %d: DescribeCluster brokers %+v, want %s:%d", c.ln, dresp.Brokers, c.host, c.port)
		}
		if fresp.ErrorCode != 0 || fresp.Host != c.host || fresp.Port != c.port {
			t.Errorf("listener %d: FindCoordinator %d %s:%d, want %s:%d", c.ln, fresp.ErrorCode, fresp.Host, fresp.Port, c.host, c.port)
		}
	}
	self := b.Image().Brokers[1]
	if self.Host != "127.0.0.1" || self.Port != port(0) || len(self.Endpoints) != 2 {
		t.Errorf("registration %+v: want Host/Port of the inter-broker listener PLAINTEXT and two endpoints", self)
	}
}
