package consumer

import (
	"bytes"
	"maps"
	"slices"
)

// TopicID is a topic's UUID.
type TopicID = [16]byte

// Assignment is a set of partitions by topic; each slice is sorted and
// non-empty.
type Assignment map[TopicID][]int32

// TP is one topic partition.
type TP struct {
	Topic     TopicID
	Partition int32
}

func cmpTP(a, b TP) int {
	if c := bytes.Compare(a.Topic[:], b.Topic[:]); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// Clone returns a deep copy of a (nil stays nil).
func (a Assignment) Clone() Assignment {
	if a == nil {
		return nil
	}
	out := make(Assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

// Count is the number of partitions in a.
func (a Assignment) Count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Has reports whether a holds tp.
func (a Assignment) Has(tp TP) bool {
	_, ok := slices.BinarySearch(a[tp.Topic], tp.Partition)
	return ok
}

// Equal reports whether a and b hold the same partitions.
func (a Assignment) Equal(b Assignment) bool {
	return maps.EqualFunc(a, b, slices.Equal[[]int32])
}

// TPs lists a's partitions in order.
func (a Assignment) TPs() []TP {
	var out []TP
	for t, ps := range a {
		for _, p := range ps {
			out = append(out, TP{t, p})
		}
	}
	slices.SortFunc(out, cmpTP)
	return out
}

// assignmentOf builds an Assignment from partitions in any order.
func assignmentOf(tps []TP) Assignment {
	out := Assignment{}
	for _, tp := range tps {
		out[tp.Topic] = append(out[tp.Topic], tp.Partition)
	}
	for t, ps := range out {
		slices.Sort(ps)
		out[t] = slices.Compact(ps)
	}
	return out
}

// minus returns the partitions of a not in b.
func (a Assignment) minus(b Assignment) Assignment {
	out := Assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if !b.Has(TP{t, p}) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

// intersect returns the partitions in both a and b.
func (a Assignment) intersect(b Assignment) Assignment {
	out := Assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if b.Has(TP{t, p}) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out
}

// union returns the partitions in a or b.
func (a Assignment) union(b Assignment) Assignment {
	return assignmentOf(append(a.TPs(), b.TPs()...))
}

// toTopicPartitions is the record form, sorted by topic id.
func (a Assignment) toTopicPartitions() []TopicPartitions {
	var out []TopicPartitions
	for t, ps := range a {
		out = append(out, TopicPartitions{TopicID: t, Partitions: slices.Clone(ps)})
	}
	slices.SortFunc(out, func(x, y TopicPartitions) int { return bytes.Compare(x.TopicID[:], y.TopicID[:]) })
	return out
}

func fromTopicPartitions(tps []TopicPartitions) Assignment {
	var all []TP
	for _, tp := range tps {
		for _, p := range tp.Partitions {
			all = append(all, TP{tp.TopicID, p})
		}
	}
	return assignmentOf(all)
}
