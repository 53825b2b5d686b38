package epoch

import (
	"reflect"
	"testing"
)

func entries(c *Cache) []Entry { return c.Entries() }

func TestAssign(t *testing.T) {
	c := &Cache{}
	if !c.Assign(0, 0) || c.Assign(0, 5) {
		t.Fatal("same epoch at a later offset must be ignored")
	}
	c.Assign(2, 10)
	c.Assign(4, 20)
	// A lower epoch at a later offset removes entries with epoch >= it.
	c.Assign(3, 25)
	if want := []Entry{{0, 0}, {2, 10}, {3, 25}}; !reflect.DeepEqual(entries(c), want) {
		t.Fatalf("got %v want %v", entries(c), want)
	}
	// A higher epoch at an earlier offset removes entries with start >= it.
	c.Assign(5, 10)
	if want := []Entry{{0, 0}, {5, 10}}; !reflect.DeepEqual(entries(c), want) {
		t.Fatalf("got %v want %v", entries(c), want)
	}
	if c.Assign(-1, 3) || c.Assign(1, -1) {
		t.Fatal("undefined epoch or offset must be ignored")
	}
}

func TestEndOffsetFor(t *testing.T) {
	c := New([]Entry{{1, 10}, {3, 20}, {6, 40}})
	const leo = 55
	cases := []struct {
		req       int32
		wantEpoch int32
		wantEnd   int64
	}{
		{6, 6, leo},  // latest epoch: LEO
		{0, 0, 10},   // below the earliest: start of the earliest
		{1, 1, 20},   // known: start of the next
		{2, 1, 20},   // between: floor epoch, start of the next higher
		{4, 3, 40},   // between
		{7, -1, -1},  // above every epoch
		{-1, -1, -1}, // undefined
	}
	for _, tc := range cases {
		e, end := c.EndOffsetFor(tc.req, leo)
		if e != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.req, e, end, tc.wantEpoch, tc.wantEnd)
		}
	}
	if e, end := (&Cache{}).EndOffsetFor(0, 5); e != -1 || end != -1 {
		t.Fatal("empty cache")
	}
}

func TestTruncate(t *testing.T) {
	c := New([]Entry{{1, 10}, {3, 20}, {6, 40}})
	c.TruncateFromEnd(40)
	if want := []Entry{{1, 10}, {3, 20}}; !reflect.DeepEqual(entries(c), want) {
		t.Fatalf("from end: %v", entries(c))
	}
	if c.TruncateFromEnd(100) {
		t.Fatal("no-op truncation reported a change")
	}
	c = New([]Entry{{1, 10}, {3, 20}, {6, 40}})
	c.TruncateFromStart(25)
	if want := []Entry{{3, 25}, {6, 40}}; !reflect.DeepEqual(entries(c), want) {
		t.Fatalf("from start: %v", entries(c))
	}
	c.TruncateFromStart(5) // below everything: unchanged
	if want := []Entry{{3, 25}, {6, 40}}; !reflect.DeepEqual(entries(c), want) {
		t.Fatalf("from start below: %v", entries(c))
	}
	if c.EpochFor(30) != 3 || c.EpochFor(41) != 6 || c.EpochFor(1) != -1 {
		t.Fatal("EpochFor")
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	c := New([]Entry{{1, 10}, {3, 20}, {6, 40}})
	d, err := Decode(c.Encode())
	if err != nil || !reflect.DeepEqual(d.Entries(), c.Entries()) {
		t.Fatalf("%v %v", err, d)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n1 10\n", "0\n2\n3 10\n1 20\n", "0\n1\nx y\n", "0\n-1\n", "0\n99999999999\n"} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(New([]Entry{{1, 10}, {3, 20}}).Encode())
	f.Add([]byte("0\n0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		d, err := Decode(c.Encode())
		if err != nil || !reflect.DeepEqual(d.Entries(), c.Entries()) {
			t.Fatal("re-encoding a decoded checkpoint changed it")
		}
	})
}
