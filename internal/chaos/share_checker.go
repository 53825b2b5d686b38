package chaos

import (
	"fmt"
	"sort"
)

// The share workload's anomalies (docs/chaos.md states the invariants),
// after the properties Kafka's share groups promise (KIP-932): a record
// is acquired by one member at a time, a confirmed accept or reject is
// never undone, a record is delivered at most share.delivery.count.limit
// times, and every record ends accepted, rejected or archived.
const (
	// AnomShareLost: an acknowledged send that no member ever tried to
	// accept or reject and that was not archived (delivered
	// share.delivery.count.limit times) by the end of the final drain; or
	// a share partition that the group's coordinator does not describe as
	// complete after it (CheckShareEnd). An accept or reject answered
	// with an error counts as tried: its state may be durable all the
	// same (the broker's state write was retried after an attempt whose
	// answer was lost, and the retry was fenced by the partition's new
	// leader; or the client retried the acknowledgement itself).
	AnomShareLost = "lost"
	// AnomDupAfterAccept: a record delivered again after an accept or
	// reject of it was confirmed to a member (polled after the
	// confirmation, and acquired after it as far as its lock's deadline
	// tells), or acknowledged again (confirmed) after that.
	AnomDupAfterAccept = "duplicate-after-accept"
	// AnomConcurrentAcq: a record held by two members at once: both
	// acknowledged it with a confirmed acknowledgement, and the spans in
	// which each certainly held its lock (from the poll that returned it
	// to the flush of the acknowledgement, before the lock's deadline)
	// overlap, or both were given the same delivery count.
	AnomConcurrentAcq = "concurrent-acquisition"
	// AnomDeliveryCount: a record delivered with a delivery count above
	// share.delivery.count.limit, or below 1.
	AnomDeliveryCount = "delivery-count-exceeded"
	// AnomShareUnexpected: a delivered value that no producer sent.
	AnomShareUnexpected = "unexpected"
)

// ShareAnomalyNames lists the share workload's own anomalies.
var ShareAnomalyNames = []string{AnomShareLost, AnomDupAfterAccept, AnomConcurrentAcq, AnomDeliveryCount, AnomShareUnexpected}

// shareAckMarginMs is how long before the client's lock deadline an
// acknowledgement must be flushed for the lock to be certainly held:
// the client computes the deadline from the remaining lock time when it
// decodes the response, later than the broker built it.
const shareAckMarginMs = 2000

// terminal reports whether d is an accept or reject.
func (d *Delivery) terminal() bool { return d.Ack == "accept" || d.Ack == "reject" }

// heldUntil is the end of the span in which d's member certainly held
// the lock, and whether there is one: d's acknowledgement was
// confirmed, flushed before the lock's deadline (less the margin), and
// the member was not given the record again before the flush returned
// (its acknowledgement could then apply to the newer acquisition).
func heldUntil(d *Delivery, same []*Delivery) (float64, bool) {
	if d.AckResult != "ok" {
		return 0, false
	}
	if d.DeadlineMs > 0 && d.AckSentMs > d.DeadlineMs-shareAckMarginMs {
		return 0, false
	}
	for _, o := range same {
		if o != d && o.Member == d.Member && o.AtMs > d.AtMs && o.AtMs <= d.AckDoneMs {
			return 0, false
		}
	}
	return d.AckSentMs, true
}

// CheckShare checks the share workload's deliveries against the sends
// and adds what it finds to a; limit is share.delivery.count.limit and
// lockMs share.record.lock.duration.ms.
func CheckShare(a *Analysis, dels []Delivery, sends []Send, limit int32, lockMs float64) {
	a.Names = append(append([]string(nil), a.Kinds()...), ShareAnomalyNames...)
	for _, k := range ShareAnomalyNames {
		if _, ok := a.Counts[k]; !ok {
			a.Counts[k] = 0
		}
	}
	sent := map[string]bool{}
	for _, s := range sends {
		sent[s.Value] = true
	}
	byVal := map[string][]*Delivery{}
	for i := range dels {
		d := &dels[i]
		if !sent[d.Value] {
			a.add(AnomShareUnexpected, "%s delivered to %s at partition %d offset %d, never sent", d.Value, d.Member, d.Partition, d.Offset)
		}
		if d.Count > limit || d.Count < 1 {
			a.add(AnomDeliveryCount, "%s delivered to %s at %.0fms with delivery count %d (limit %d)", d.Value, d.Member, d.AtMs, d.Count, limit)
		}
		byVal[d.Value] = append(byVal[d.Value], d)
	}
	vals := make([]string, 0, len(byVal))
	for v := range byVal {
		vals = append(vals, v)
	}
	sort.Strings(vals)
	for _, v := range vals {
		ds := byVal[v]
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].AtMs < ds[j].AtMs })
		checkAfterAccept(a, ds, lockMs)
		checkConcurrent(a, ds)
	}
	var lost []Send
	for _, s := range sends {
		if s.Outcome == "ok" && !shareComplete(byVal[s.Value], limit) {
			lost = append(lost, s)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].StartMs < lost[j].StartMs })
	for _, s := range lost {
		a.add(AnomShareLost, "%s acknowledged at partition %d offset %d: %s", s.Value, s.Partition, s.Offset, describeDeliveries(byVal[s.Value]))
	}
}

// checkAfterAccept finds deliveries of one record after a confirmed
// accept or reject.
func checkAfterAccept(a *Analysis, ds []*Delivery, lockMs float64) {
	reported := map[*Delivery]bool{}
	for _, d1 := range ds {
		if !d1.terminal() || d1.AckResult != "ok" {
			continue
		}
		// d1's acknowledgement may have applied to a newer acquisition by
		// the same member if d1's own lock had passed.
		lapsed := d1.Stalled || (d1.DeadlineMs > 0 && d1.AckSentMs > d1.DeadlineMs-shareAckMarginMs)
		for _, d2 := range ds {
			if d2 == d1 || reported[d2] || (lapsed && d2.Member == d1.Member && d2.Count > d1.Count) {
				continue
			}
			switch {
			// d2 was polled after the accept was confirmed, and the
			// latest it can have been acquired (its lock's deadline, as
			// the client computes it at or after the broker's, less the
			// lock duration) is after it too: it was not acquired before
			// the accept (from an older leader, say) and buffered in the
			// client.
			case d2.AtMs > d1.AckDoneMs && (d2.DeadlineMs == 0 || d2.DeadlineMs-lockMs > d1.AckDoneMs):
				a.add(AnomDupAfterAccept, "%s (partition %d offset %d) delivered to %s at %.0fms (count %d) after %s's %s was confirmed at %.0fms",
					d2.Value, d2.Partition, d2.Offset, d2.Member, d2.AtMs, d2.Count, d1.Member, d1.Ack, d1.AckDoneMs)
			case d2.AckResult == "ok" && d2.AckSentMs > d1.AckDoneMs:
				a.add(AnomDupAfterAccept, "%s (partition %d offset %d): %s's %s confirmed at %.0fms, then %s's %s, sent at %.0fms, confirmed too",
					d2.Value, d2.Partition, d2.Offset, d1.Member, d1.Ack, d1.AckDoneMs, d2.Member, d2.Ack, d2.AckSentMs)
			default:
				continue
			}
			reported[d2] = true
		}
	}
}

// checkConcurrent finds two members holding one record at once.
func checkConcurrent(a *Analysis, ds []*Delivery) {
	for i, d1 := range ds {
		end1, ok1 := heldUntil(d1, ds)
		for _, d2 := range ds[i+1:] {
			if d2.Member == d1.Member {
				continue
			}
			end2, ok2 := heldUntil(d2, ds)
			if !ok1 || !ok2 {
				continue
			}
			sameCount := d1.Count == d2.Count
			if max(d1.AtMs, d2.AtMs) < min(end1, end2) || sameCount {
				why := "their locks overlap"
				if sameCount {
					why = fmt.Sprintf("both with delivery count %d", d1.Count)
				}
				a.add(AnomConcurrentAcq, "%s (partition %d offset %d) held by %s [%.0f, %.0f]ms and %s [%.0f, %.0f]ms, both acknowledgements confirmed: %s",
					d1.Value, d1.Partition, d1.Offset, d1.Member, d1.AtMs, end1, d2.Member, d2.AtMs, end2, why)
			}
		}
	}
}

// shareComplete reports whether a record may have ended accepted,
// rejected or archived as far as its deliveries tell: an accept or reject
// sent (whatever its answer: see AnomShareLost), or a delivery at the
// delivery limit (the broker archives the record when that lock passes or
// is released).
func shareComplete(ds []*Delivery, limit int32) bool {
	for _, d := range ds {
		if d.terminal() && d.AckResult != "" {
			return true
		}
		if d.Count >= limit {
			return true
		}
	}
	return false
}

// describeDeliveries summarizes a record's deliveries for an example.
func describeDeliveries(ds []*Delivery) string {
	if len(ds) == 0 {
		return "never delivered"
	}
	s := fmt.Sprintf("%d deliveries:", len(ds))
	for i, d := range ds {
		if i >= 4 {
			s += " ..."
			break
		}
		ack := d.Ack
		if ack == "" {
			ack = "none"
		}
		s += fmt.Sprintf(" [%s count %d at %.0fms ack %s %s]", d.Member, d.Count, d.AtMs, ack, d.AckResult)
	}
	return s
}

// CheckShareEnd adds a lost anomaly for every share partition that the
// group's coordinator does not describe as complete after the drain: its
// start offset short of the high watermark, or records above it not
// accepted, rejected or archived (lag). A partition that could not be
// described is not counted (the caller notes it).
func CheckShareEnd(a *Analysis, end map[int32]SharePartitionEnd) {
	ps := make([]int32, 0, len(end))
	for p := range end {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		e := end[p]
		if e.Err != "" {
			continue
		}
		if e.Start != e.End || e.Lag != 0 {
			a.add(AnomShareLost, "partition %d: the group's coordinator describes start offset %d and lag %d after the drain, high watermark %d", p, e.Start, e.Lag, e.End)
		}
	}
}
