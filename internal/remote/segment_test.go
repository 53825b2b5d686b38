package remote

import "testing"

func TestObjectKeyAndMetadata(t *testing.T) {
	p := Partition{TopicID: [16]byte{1}, Topic: "t", Partition: 3}
	s := Segment{Partition: p, ID: [16]byte{9}, StartOffset: 100, EndOffset: 199, State: CopyFinished}
	if got, want := ObjectKey("pfx/", &s, FileLog), "pfx/t-AQAAAAAAAAAAAAAAAAAAAA/3/00000000000000000100-CQAAAAAAAAAAAAAAAAAAAA.log"; got != want {
		t.Fatalf("key %q, want %q", got, want)
	}
	var m MemMetadata
	m.Add(s)
	m.Add(Segment{Partition: p, ID: [16]byte{8}, StartOffset: 0, EndOffset: 99, State: CopyFinished})
	m.Add(Segment{Partition: p, ID: [16]byte{7}, StartOffset: 200, EndOffset: 299, State: CopyStarted})
	segs := m.Segments(p)
	if len(segs) != 2 || segs[0].StartOffset != 0 || segs[1].StartOffset != 100 || !segs[1].Covers(199) || segs[1].Covers(200) {
		t.Fatalf("segments %+v", segs)
	}
}
