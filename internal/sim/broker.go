package sim

import (
	"github.com/sluice-io/sluice/internal/epoch"
	prodstate "github.com/sluice-io/sluice/internal/producer"
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
	alter    *replica.AlterPartitionRequest
	alterAt  int64
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
	b.alive = true
	b.incarnation++
	b.epoch = 0
	inc := b.incarnation
	b.w.at(int64(b.w.intn(10)), func() { b.loop(inc) })
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
	} else if w.now%50 < 10 {
		id, ep := b.id, b.epoch
		w.net.send(id, controllerID, func() { w.ctrl.heartbeat(id, ep) })
	}
	for _, bp := range b.parts {
		if bp == nil || bp.r == nil {
			continue
		}
		bp.r.Tick(w.now)
		b.process(bp)
		if bp.alter != nil && w.now-bp.alterAt > 200 {
			b.sendAlter(bp, bp.alter) // no answer: resend
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

// restart recovers every replica from its disk and registers again (with a
// new broker epoch, so the controller fences the old incarnation).
func (b *broker) restart() {
	for _, bp := range b.parts {
		if bp != nil {
			*bp = bpart{p: bp.p, disk: bp.disk} // the replica is rebuilt on registration
		}
	}
	b.start()
	b.w.tracef("RESTART broker %d", b.id)
}

// registered is the controller's answer to register.
func (b *broker) registered(epochNum int64) {
	if b.epoch != 0 {
		return
	}
	b.epoch = epochNum
	w := b.w
	for _, bp := range b.parts {
		if bp == nil {
			continue
		}
		d := bp.disk
		c := epoch.New(d.epochs)
		ps := prodstate.NewState()
		for i := range d.batches {
			x := &d.batches[i]
			if x.ProducerID >= 0 {
				ps.Update(x.ProducerID, x.ProducerEpoch, prodstate.Batch{FirstSeq: x.BaseSeq, LastSeq: x.LastSeq(),
					FirstOffset: x.BaseOffset, LastOffset: x.LastOffset(), MaxTime: x.MaxTimestamp})
			}
		}
		t := &w.topics[bp.p]
		bp.r = replica.New(replica.Config{ID: b.id, BrokerEpoch: epochNum, Partition: t.name, MinISR: t.minISR, LagTimeMaxMs: lagTimeMs},
			replica.LogState{LEO: d.leo(), HW: d.hw, Epochs: c, Producers: ps})
		bp.r.Tick(w.now)
		w.check.started(b.id, bp.p, bp.r)
		if w.opts.Verbose {
			w.tracef("recovered %s", bp.r)
		}
		b.process(bp) // persists the recovered epoch cache
	}
	w.tracef("broker %d registered, epoch %d", b.id, epochNum)
}

// applyMetadata hands the controller's partition states to the replicas.
func (b *broker) applyMetadata(states []replica.PartitionState) {
	for p, st := range states {
		bp := b.parts[p]
		if bp == nil || bp.r == nil {
			continue
		}
		before, epochBefore := bp.r.Role(), bp.r.LeaderEpoch()
		bp.r.ApplyMetadata(st)
		if bp.r.Role() != before || bp.r.LeaderEpoch() != epochBefore {
			b.w.tracef("%s@%d now %s of epoch %d (leader %d)", b.w.topics[p].name, b.id, bp.r.Role(), bp.r.LeaderEpoch(), bp.r.Leader())
			bp.fetching = false
		}
		b.process(bp)
		b.maybeFetch(bp)
	}
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
	if tr := rd.Truncate; tr != nil {
		k := d.find(tr.Offset)
		if tr.Fully {
			k = 0
		}
		w.check.truncated(b.id, bp.p, tr.Offset)
		w.tracef("%s@%d truncate to %d (had %d)", w.topics[bp.p].name, b.id, tr.Offset, d.leo())
		w.stats.Truncations++
		clear(d.batches[k:])
		d.batches = d.batches[:k]
		d.flushedN = min(d.flushedN, k)
	}
	for i := range rd.Append {
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
		b.sendAlter(bp, p)
	}
	r.Advance()
}

func (b *broker) sendAlter(bp *bpart, p *replica.AlterPartitionRequest) {
	w := b.w
	bp.alter, bp.alterAt = p, w.now
	id, ep, part, req := b.id, b.epoch, bp.p, *p
	w.tracef("%s@%d propose isr=%v (le=%d pe=%d)", w.topics[part].name, id, req.NewISR, req.LeaderEpoch, req.PartitionEpoch)
	w.net.send(id, controllerID, func() { w.ctrl.alterPartition(id, ep, part, req) })
}

// alterResult delivers the controller's answer.
func (b *broker) alterResult(part int, res replica.AlterPartitionResult) {
	bp := b.parts[part]
	if bp == nil || bp.r == nil {
		return
	}
	if bp.alter != nil && bp.alter.Seq == res.Seq {
		bp.alter = nil
	}
	bp.r.ISRChangeResult(res)
	if p := bp.r.PendingISR(); p != nil && p.Seq == res.Seq && res.Error != 0 {
		bp.alter = p // still pending: keep resending on the loop
		bp.alterAt = b.w.now
	}
	b.process(bp)
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
