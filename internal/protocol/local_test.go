package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLocal: a request reaches its handler decoded from its own encoding,
// per-connection state persists across calls, the response comes back
// through an encode and decode, and versions outside the handler's range
// and calls after Close fail.
func TestLocal(t *testing.T) {
	reg := NewRegistry()
	reg.Register(Handler{Key: 3, MinVersion: 4, MaxVersion: 12, Serve: func(r *Request) Reply {
		n, _ := r.Conn.Values["n"].(int)
		r.Conn.Values["n"] = n + 1
		req := r.Body.(*kmsg.MetadataRequest)
		resp := kmsg.NewPtrMetadataResponse()
		resp.ClusterID = kmsg.StringPtr(*req.Topics[0].Topic)
		resp.ThrottleMillis = int32(n + 1)
		if r.Conn.Spliceable() {
			t.Error("a local connection is spliceable")
		}
		return Reply{Await: func() kmsg.Response { return resp }}
	}})
	l := NewLocal(reg)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("t")
	req.Topics = append(req.Topics, rt)
	for i := int32(1); i <= 2; i++ {
		resp, err := l.Do("c", req)
		if err != nil {
			t.Fatal(err)
		}
		m := resp.(*kmsg.MetadataResponse)
		if *m.ClusterID != "t" || m.ThrottleMillis != i || m.GetVersion() != 12 {
			t.Fatalf("call %d: %+v", i, m)
		}
	}
	req.SetVersion(2)
	if _, err := l.Do("c", req); err == nil {
		t.Fatal("version 2 outside the handler's 4-12 was served")
	}
	l.Close()
	req.SetVersion(12)
	if _, err := l.Do("c", req); err != ErrLocalClosed {
		t.Fatalf("after Close: %v", err)
	}
}
