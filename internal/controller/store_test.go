package controller

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestBoltStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte{byte(i)}, Extensions: []byte("x"), AppendedAt: time.Unix(0, int64(i))})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("term"), 7); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = openBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 5 || last != 10 {
		t.Fatalf("first %d last %d", first, last)
	}
	var l raft.Log
	if err := s.GetLog(7, &l); err != nil || l.Term != 2 || l.Data[0] != 7 || string(l.Extensions) != "x" || l.AppendedAt.UnixNano() != 7 {
		t.Fatalf("log 7: %+v %v", l, err)
	}
	if err := s.GetLog(3, &l); err != raft.ErrLogNotFound {
		t.Fatalf("deleted log: %v", err)
	}
	if v, err := s.GetUint64([]byte("term")); v != 7 || err != nil {
		t.Fatalf("term %d %v", v, err)
	}
	if _, err := s.Get([]byte("missing")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v", err)
	}
}
