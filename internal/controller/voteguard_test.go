package controller

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestGuardedTransport: while guarded, a voter refuses vote and pre-vote
// requests at the transport (raft never sees them) and asks for none;
// unguarded, requests reach raft's consumer as before.
func TestGuardedTransport(t *testing.T) {
	_, a := raft.NewInmemTransport("a")
	_, b := raft.NewInmemTransport("b")
	a.Connect("b", b)
	b.Connect("a", a)
	g := newGuardedTransport(b, "2", true)
	defer g.Close()

	var resp raft.RequestVoteResponse
	if err := a.RequestVote("2", "b", &raft.RequestVoteRequest{Term: 7, LastLogIndex: 3, LastLogTerm: 2}, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Granted || resp.Term != 7 {
		t.Fatalf("guarded vote: %+v", resp)
	}
	var pre raft.RequestPreVoteResponse
	if err := a.RequestPreVote("2", "b", &raft.RequestPreVoteRequest{Term: 8}, &pre); err != nil {
		t.Fatal(err)
	}
	if pre.Granted || pre.Term != 8 {
		t.Fatalf("guarded pre-vote: %+v", pre)
	}
	if err := g.RequestVote("1", "a", &raft.RequestVoteRequest{Term: 9}, &raft.RequestVoteResponse{}); err != errGuarded {
		t.Fatalf("a guarded voter asked for a vote: %v", err)
	}
	if err := g.RequestPreVote("1", "a", &raft.RequestPreVoteRequest{Term: 9}, &raft.RequestPreVoteResponse{}); err != errGuarded {
		t.Fatalf("a guarded voter asked for a pre-vote: %v", err)
	}
	select {
	case rpc := <-g.Consumer():
		t.Fatalf("raft saw %T while guarded", rpc.Command)
	default:
	}

	// Other requests pass while guarded: the voter catches up.
	go func() {
		rpc := <-g.Consumer()
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
	}()
	var ae raft.AppendEntriesResponse
	if err := a.AppendEntries("2", "b", &raft.AppendEntriesRequest{Term: 7}, &ae); err != nil || !ae.Success {
		t.Fatalf("append entries while guarded: %+v, %v", ae, err)
	}

	g.guarded.Store(false)
	go func() {
		select {
		case rpc := <-g.Consumer():
			rpc.Respond(&raft.RequestVoteResponse{Term: 10, Granted: true}, nil)
		case <-time.After(10 * time.Second):
		}
	}()
	resp = raft.RequestVoteResponse{}
	if err := a.RequestVote("2", "b", &raft.RequestVoteRequest{Term: 10}, &resp); err != nil || !resp.Granted {
		t.Fatalf("unguarded vote: %+v, %v", resp, err)
	}
}
