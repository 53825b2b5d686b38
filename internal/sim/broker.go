package sim

import (
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/replica"
)

// disk is one replica's simulated log. Batches up to flushedN are synced; a
// crash keeps them and a random prefix of the rest. The epoch checkpoint is
// written synchronously (as Kafka does on assign).
type disk struct {
	batches  []replica.Batch
	flushedN int
	hw       int64 // HW checkpoint, written at each flush
	epochs   []epoch.Entry
}

func (d *disk) leo() int64 {
	if len(d.batches) == 0 {
		return 0
	}
	return d.batches[len(d.batches)-1].LastOffset() + 1
}

func (d *disk) flushedLEO() int64 {
	if d.flushedN == 0 {
		return 0
	}
	return d.batches[d.flushedN-1].LastOffset() + 1
}

// read returns up to max batches from the one holding offset from (as
// Kafka does), below to.
func (d *disk) read(from, to int64, max int) []replica.Batch {
	if from >= to {
		return nil
	}
	i := d.find(from)
	if i > 0 && d.batches[i-1].LastOffset() >= from {
		i--
	}
	var out []replica.Batch
	for ; i < len(d.batches) && len(out) < max && d.batches[i].BaseOffset < to; i++ {
		out = append(out, d.batches[i])
	}
	return out
}

// find returns the index of the first batch with BaseOffset >= off.
func (d *disk) find(off int64) int {
	lo, hi := 0, len(d.batches)
	for lo < hi {
		m := (lo + hi) / 2
		if d.batches[m].BaseOffset < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// bpart is a broker's replica of one partition plus its driver state.
type bpart struct {
	p        int
	r        *replica.Replica
	disk     *disk
	fetching bool  // a fetch is in flight
	fetchAt  int64 // when it was sent, or earliest next fetch
	flushing bool
	// alter is the AlterPartition in flight (one at a time, as the real
	// driver), sent at alterAt; alterNext the newest proposal the machine
	// made meanwhile, sent when alter returns (isrInflight/isrNext in
	// internal/broker/partition.go).
	alter     *replica.AlterPartitionRequest
	alterAt   int64
	alterNext *replica.AlterPartitionRequest
}

// broker drives its replicas as the real replication driver would: it
// executes each Ready against the disk, sends fetches and responses, flushes
// with group commit, heartbeats to the controller and forwards ISR changes.
type broker struct {
	w           *world
	id          int32
	alive       bool
	incarnation int
	epoch       int64 // broker epoch; 0 until registered
	parts       []*bpart
	registering int64
	// Metadata (meta.go). meta and metaLog are the broker's metadata log
	// and survive crashes; caughtUp is per incarnation.
	meta     *image
	metaLog  []*image
	caughtUp bool
	wantDown bool // controlled shutdown requested (shutdown.go)
}

func newBroker(w *world, id int32) *broker {
	b := &broker{w: w, id: id, parts: make([]*bpart, len(w.topics))}
	for p := range w.topics {
		for _, r := range w.topics[p].replicas {
			if r == id {
				b.parts[p] = &bpart{p: p, disk: &disk{}}
			}
		}
	}
	return b
}

func (b *broker) start() {
	w := b.w
	b.alive = true
	b.incarnation++
	b.epoch = 0
	b.caughtUp = false
	b.wantDown = false
	inc := b.incarnation
	// Replaying the metadata log takes a while before the broker registers.
	replay := int64(2*len(b.metaLog) + w.intn(20))
	b.registering = w.now - 100 + replay
	b.replayMetadata(inc)
	w.at(int64(w.intn(10)), func() { b.loop(inc) })
}

// loop runs every 10ms while this incarnation lives.
func (b *broker) loop(inc int) {
	if !b.alive || b.incarnation != inc {
		return
	}
	w := b.w
	if b.epoch == 0 {
		if w.now-b.registering > 100 {
			b.registering = w.now
			id := b.id
			w.net.send(id, controllerID, func() { w.ctrl.register(id) })
		}
	} else if w.now%50 < 10 || b.wantDown {
		id, ep, down := b.id, b.epoch, b.wantDown
		applied := int64(0)
		if b.meta != nil {
			applied = b.meta.offset
		}
		w.net.send(id, controllerID, func() { w.ctrl.heartbeat(id, ep, applied, down) })
	}
	for _, bp := range b.parts {
		if bp == nil || bp.r == nil {
			continue
		}
		bp.r.Tick(w.now)
		b.process(bp)
		if bp.alter != nil && w.now-bp.alterAt > 200 {
			b.alterTimedOut(bp)
		}
		if bp.fetching && w.now-bp.fetchAt > 200 {
			bp.fetching = false // lost: fetch again
		}
		b.maybeFetch(bp)
		b.maybeFlush(bp)
	}
	w.at(10, func() { b.loop(inc) })
}

func (b *broker) crash() {
	w := b.w
	b.alive = false
	lost := 0
	for _, bp := range b.parts {
		if bp == nil {
			continue
		}
		d := bp.disk
		keep := d.flushedN + w.intn(len(d.batches)-d.flushedN+1)
		lost += len(d.batches) - keep
		clear(d.batches[keep:])
		d.batches = d.batches[:keep]
		d.flushedN = keep
		bp.r = nil
		w.check.crashed(b.id, bp.p, d.leo())
	}
	w.stats.Crashes++
	w.tracef("CRASH broker %d (lost %d unsynced batches)", b.id, lost)
}

// restart registers again (with a new broker epoch, so the controller
// fences the old incarnation); replicas are rebuilt from disk once the
// broker acts on metadata (meta.go).
func (b *broker) restart() {
	for _, bp := range b.parts {
		if bp != nil {
			*bp = bpart{p: bp.p, disk: bp.disk} // the replica is rebuilt on registration
		}
	}
	b.start()
	b.w.tracef("RESTART broker %d", b.id)
}

// process executes the replica's Ready: truncate, append, persist, reply,
// propose (replica.Ready's order).
func (b *broker) process(bp *bpart) {
	r := bp.r
	if !r.HasReady() {
		return
	}
	w := b.w
	rd := r.Ready()
	d := bp.disk
	resync := int64(-1)
	if tr := rd.Truncate; tr != nil {
		// Like Kafka's truncateTo, cut the whole batch holding the offset.
		k := d.find(tr.Offset)
		if k > 0 && d.batches[k-1].LastOffset() >= tr.Offset {
			k--
		}
		if tr.Fully {
			k = 0
		}
		w.tracef("%s@%d truncate to %d (had %d)", w.topics[bp.p].name, b.id, tr.Offset, d.leo())
		w.stats.Truncations++
		clear(d.batches[k:])
		d.batches = d.batches[:k]
		d.flushedN = min(d.flushedN, k)
		w.check.truncated(b.id, bp.p, min(tr.Offset, d.leo()))
		if !tr.Fully && d.leo() < tr.Offset {
			resync = d.leo() // the machine follows the log after Advance
		}
	}
	for i := range rd.Append {
		if resync >= 0 {
			break // would land at the wrong offsets: fetched again
		}
		if rd.Append[i].BaseOffset != d.leo() {
			w.fail("%s@%d: append at %d but disk LEO is %d", w.topics[bp.p].name, b.id, rd.Append[i].BaseOffset, d.leo())
			return
		}
		d.batches = append(d.batches, rd.Append[i])
	}
	if rd.Epochs != nil {
		d.epochs = rd.Epochs
	}
	if rd.HWChanged && r.Role() == replica.RoleLeader && w.opts.Verbose {
		w.tracef("%s@%d hw=%d leo=%d maximal=%v", w.topics[bp.p].name, b.id, rd.HW, r.LEO(), r.MaximalISR())
	}
	for _, c := range rd.Completed {
		w.onProduceResult(b, bp, c)
	}
	if p := rd.ISRProposal; p != nil {
		switch {
		case bp.alter == nil:
			b.sendAlter(bp, p)
		case w.opts.bugs.dropQueuedISR:
			w.tracef("%s@%d drops proposal isr=%v: one is in flight", w.topics[bp.p].name, b.id, p.NewISR)
		default:
			bp.alterNext = p
		}
	}
	r.Advance()
	if resync >= 0 {
		w.tracef("%s@%d log ends at %d, below the truncation point", w.topics[bp.p].name, b.id, resync)
		r.LogTruncated(resync)
		b.process(bp)
	}
}

func (b *broker) sendAlter(bp *bpart, p *replica.AlterPartitionRequest) {
	w := b.w
	bp.alter, bp.alterAt = p, w.now
	id, ep, part, req := b.id, b.epoch, bp.p, *p
	w.tracef("%s@%d propose isr=%v (le=%d pe=%d)", w.topics[part].name, id, req.NewISR, req.LeaderEpoch, req.PartitionEpoch)
	w.net.send(id, controllerID, func() { w.ctrl.alterPartition(id, ep, part, req) })
}

// alterResult delivers the controller's answer to the call in flight.
func (b *broker) alterResult(part int, res replica.AlterPartitionResult) {
	bp := b.parts[part]
	if bp == nil || bp.r == nil || bp.alter == nil || bp.alter.Seq != res.Seq {
		return // an answer to an earlier copy of a resent call
	}
	bp.alter = nil
	bp.r.ISRChangeResult(res)
	b.process(bp)
	b.sendNextAlter(bp)
}

// alterTimedOut: the call in flight got no answer; like the real driver's
// failed call, the machine sees REQUEST_TIMED_OUT and proposes again.
func (b *broker) alterTimedOut(bp *bpart) {
	seq := bp.alter.Seq
	bp.alter = nil
	bp.r.ISRChangeResult(replica.AlterPartitionResult{Seq: seq, Error: replica.ErrRequestTimedOut})
	b.process(bp)
	b.sendNextAlter(bp)
}

// sendNextAlter sends the proposal queued while a call was in flight, if
// the machine still holds it.
func (b *broker) sendNextAlter(bp *bpart) {
	next := bp.alterNext
	bp.alterNext = nil
	if bp.alter != nil || next == nil {
		return
	}
	if p := bp.r.PendingISR(); p != nil && p.Seq == next.Seq {
		b.sendAlter(bp, next)
	}
}

func (b *broker) maybeFetch(bp *bpart) {
	w := b.w
	if bp.r == nil || bp.fetching || w.now < bp.fetchAt {
		return
	}
	req, ok := bp.r.FetchRequest()
	if !ok || req.Leader == b.id {
		return
	}
	bp.fetching, bp.fetchAt = true, w.now
	leader, from, part := req.Leader, b.id, bp.p
	w.net.send(from, leader, func() { w.brokers[leader-1].handleFetch(from, part, req) })
}

// handleFetch serves a follower's fetch on the leader.
func (b *broker) handleFetch(from int32, part int, req replica.FetchRequest) {
	w := b.w
	bp := b.parts[part]
	if bp == nil || bp.r == nil {
		return
	}
	res := bp.r.HandleFetch(req)
	resp := replica.FetchResponse{Request: req, FetchResult: res}
	if res.Error == 0 && res.Diverging == nil {
		resp.Batches = bp.disk.read(res.From, res.To, 4)
	}
	if res.Diverging != nil {
		w.stats.Diverging++
		w.tracef("%s@%d -> %d: diverging epoch=%d end=%d (fetch %d lastEpoch %d)", w.topics[part].name, b.id, from,
			res.Diverging.Epoch, res.Diverging.EndOffset, req.FetchOffset, req.LastFetchedEpoch)
	}
	b.process(bp)
	w.net.send(b.id, from, func() { w.brokers[from-1].handleFetchResponse(part, resp) })
}

func (b *broker) handleFetchResponse(part int, resp replica.FetchResponse) {
	w := b.w
	bp := b.parts[part]
	if bp == nil || bp.r == nil {
		return
	}
	if resp.Request.FetchOffset == bp.r.LEO() && resp.Request.CurrentLeaderEpoch == bp.r.LeaderEpoch() {
		bp.fetching = false
	}
	bp.r.HandleFetchResponse(resp)
	b.process(bp)
	switch {
	case resp.Error != 0:
		bp.fetchAt = w.now + 50 // back off until metadata moves
	case len(resp.Batches) == 0 && resp.Diverging == nil:
		bp.fetchAt = w.now + 15 // long-poll stand-in
	}
	b.maybeFlush(bp)
	b.maybeFetch(bp)
}

// maybeFlush starts a group-commit fsync of everything written so far.
func (b *broker) maybeFlush(bp *bpart) {
	w := b.w
	d := bp.disk
	if bp.r == nil || bp.flushing || d.flushedN == len(d.batches) {
		return
	}
	bp.flushing = true
	gen, n, to, inc := bp.r.LogGen(), len(d.batches), d.leo(), b.incarnation
	delay := 1 + int64(w.intn(3))
	if w.chance(0.05) {
		delay += 30 // a slow disk
	}
	w.at(delay, func() {
		if !b.alive || b.incarnation != inc || bp.r == nil {
			return
		}
		bp.flushing = false
		if bp.r.LogGen() == gen {
			d.flushedN = max(d.flushedN, min(n, len(d.batches)))
			d.hw = bp.r.HW()
			bp.r.Flushed(to, gen)
			b.process(bp)
		}
		b.maybeFetch(bp)
		b.maybeFlush(bp)
	})
}
