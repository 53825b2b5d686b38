package share

import (
	"container/heap"
	"sort"
)

// Combine merges newer state batches into older ones as Kafka's
// PersisterStateBatchCombiner does: batches (or their parts) below
// startOffset are dropped, and where batches overlap each offset takes
// the batch of higher priority, the higher delivery count and, for equal
// counts, the higher delivery state. Delivery counts only grow and
// Acknowledged and Archived are terminal, so in a valid history that is
// the newer batch. Contiguous runs of one state and count are joined. The
// result is sorted and has no overlaps; the inputs are not changed.
func Combine(older, newer []StateBatch, startOffset int64) []StateBatch {
	all := make([]StateBatch, 0, len(older)+len(newer))
	for _, src := range [][]StateBatch{older, newer} {
		for _, b := range src {
			if b.LastOffset < startOffset || b.LastOffset < b.FirstOffset {
				continue
			}
			b.FirstOffset = max(b.FirstOffset, startOffset)
			all = append(all, b)
		}
	}
	if len(all) == 0 {
		return nil
	}
	sort.Slice(all, func(i, j int) bool { return all[i].FirstOffset < all[j].FirstOffset })
	// Sweep the elementary segments between batch boundaries, keeping the
	// batches covering the current offset in a heap by priority.
	var out []StateBatch
	active := &batchHeap{}
	next := 0
	pos := all[0].FirstOffset
	for {
		for next < len(all) && all[next].FirstOffset <= pos {
			heap.Push(active, all[next])
			next++
		}
		for active.Len() > 0 && (*active)[0].LastOffset < pos {
			heap.Pop(active)
		}
		if active.Len() == 0 {
			if next == len(all) {
				break
			}
			pos = all[next].FirstOffset
			continue
		}
		top := (*active)[0]
		// The segment ends where the top batch ends or the next batch
		// starts, whichever is first.
		end := top.LastOffset
		if next < len(all) && all[next].FirstOffset-1 < end {
			end = all[next].FirstOffset - 1
		}
		seg := StateBatch{FirstOffset: pos, LastOffset: end, DeliveryState: top.DeliveryState, DeliveryCount: top.DeliveryCount}
		if n := len(out); n > 0 && out[n-1].LastOffset+1 == seg.FirstOffset &&
			out[n-1].DeliveryState == seg.DeliveryState && out[n-1].DeliveryCount == seg.DeliveryCount {
			out[n-1].LastOffset = seg.LastOffset
		} else {
			out = append(out, seg)
		}
		if end == maxOffset {
			break
		}
		pos = end + 1
	}
	return out
}

// maxOffset is the largest offset a batch may end at.
const maxOffset = int64(^uint64(0) >> 1)

// higher reports whether a has priority over b where they overlap.
func higher(a, b StateBatch) bool {
	if a.DeliveryCount != b.DeliveryCount {
		return a.DeliveryCount > b.DeliveryCount
	}
	return a.DeliveryState > b.DeliveryState
}

// batchHeap is a max-heap of batches by priority.
type batchHeap []StateBatch

func (h batchHeap) Len() int           { return len(h) }
func (h batchHeap) Less(i, j int) bool { return higher(h[i], h[j]) }
func (h batchHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *batchHeap) Push(x any)        { *h = append(*h, x.(StateBatch)) }
func (h *batchHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
