package sim

import (
	"encoding/binary"

	"github.com/sluice-io/sluice/internal/replica"
)

// pbatch is a producer's batch in flight: its identity (producer epoch and
// first sequence) and the unique ids of its records (the payload).
type pbatch struct {
	pepoch int16
	seq    int32
	ids    []uint64
	data   []byte
}

// producer is an idempotent producer with one batch in flight. It retries a
// batch with the same sequence until it is acknowledged; an out-of-order or
// fenced-epoch answer bumps its epoch and resends the records as new ones.
type producer struct {
	w       *world
	id      int32 // node id
	part    int
	acks    int16
	pid     int64
	pepoch  int16
	seq     int32
	cur     *pbatch
	attempt uint64 // request id in flight, 0 if none
	sentAt  int64
	retryAt int64
}

// consumer reads one partition from the leader, up to its HW.
type consumer struct {
	w       *world
	id      int32
	part    int
	pos     int64
	attempt uint64
	sentAt  int64
}

type client interface{ loop() }

func (w *world) addClients(p int) {
	add := func(c client) {
		w.clients = append(w.clients, c)
		w.at(int64(w.intn(20)), c.loop)
	}
	nextID := func() int32 { return int32(clientBase + len(w.clients)) }
	id := nextID()
	add(&producer{w: w, id: id, part: p, acks: replica.AcksAll, pid: int64(id)})
	if w.chance(0.7) {
		id = nextID()
		add(&producer{w: w, id: id, part: p, acks: replica.AcksLeader, pid: int64(id)})
	}
	add(&consumer{w: w, id: nextID(), part: p})
}

func (p *producer) loop() {
	w := p.w
	defer w.at(5+int64(w.intn(20)), p.loop)
	if w.nemesisOff && w.chance(0.5) {
		return // calmer while settling
	}
	if p.cur == nil {
		n := 1 + w.intn(3)
		b := &pbatch{pepoch: p.pepoch, seq: p.seq, data: make([]byte, 8*n)}
		for i := 0; i < n; i++ {
			w.nextRec++
			b.ids = append(b.ids, w.nextRec)
			binary.LittleEndian.PutUint64(b.data[8*i:], w.nextRec)
		}
		p.cur = b
	}
	if p.attempt != 0 && w.now-p.sentAt < 400 {
		return // in flight
	}
	if w.now < p.retryAt {
		return
	}
	leader := w.ctrl.parts[p.part].leader
	if leader < 0 {
		return
	}
	w.nextReq++
	p.attempt, p.sentAt = w.nextReq, w.now
	req := replica.ProduceRequest{ID: w.nextReq, Acks: p.acks, DeadlineMs: w.now + 300, Batch: replica.Batch{
		NumRecords: int32(len(p.cur.ids)), ProducerID: p.pid, ProducerEpoch: p.cur.pepoch, BaseSeq: p.cur.seq,
		MaxTimestamp: w.now, Data: p.cur.data}}
	w.reqs[req.ID] = p
	part, from := p.part, p.id
	w.net.send(from, leader, func() { w.brokers[leader-1].handleProduce(from, part, req) })
}

func (p *producer) result(res replica.ProduceResult) {
	w := p.w
	if res.ID != p.attempt || p.cur == nil {
		return
	}
	p.attempt = 0
	switch res.Error {
	case replica.ErrNone:
		if p.acks == replica.AcksAll {
			w.stats.AckedAll++
			w.check.ackedAll(p.part, p.pid, p.cur, res)
		} else {
			w.stats.AckedOne++
		}
		p.seq += int32(len(p.cur.ids))
		p.cur = nil
	case replica.ErrOutOfOrderSequence, replica.ErrInvalidProducerEpoch:
		// The state for our last batches is gone (an acks=1 loss, or an
		// unclean election): start a new epoch, the batch as new records.
		p.pepoch++
		p.seq = 0
		p.cur = nil
		w.tracef("producer %d: %d, bumping epoch to %d", p.pid, res.Error, p.pepoch)
	default:
		p.retryAt = w.now + 20
	}
}

func (c *consumer) loop() {
	w := c.w
	defer w.at(10+int64(w.intn(20)), c.loop)
	if c.attempt != 0 && w.now-c.sentAt < 300 {
		return
	}
	leader := w.ctrl.parts[c.part].leader
	if leader < 0 {
		return
	}
	w.nextReq++
	c.attempt, c.sentAt = w.nextReq, w.now
	req, from, part, pos := w.nextReq, c.id, c.part, c.pos
	w.net.send(from, leader, func() { w.brokers[leader-1].handleConsume(from, part, req, pos) })
}

func (c *consumer) result(req uint64, res replica.FetchResult, batches []replica.Batch) {
	w := c.w
	if req != c.attempt {
		return
	}
	c.attempt = 0
	if res.Error == replica.ErrOffsetOutOfRange {
		w.check.consumerOutOfRange(c.part, c.pos, res)
		if res.LEO < c.pos {
			c.pos = res.HW // only after an unclean election
		}
		return
	}
	for i := range batches {
		b := &batches[i]
		if b.BaseOffset < c.pos && b.LastOffset() >= c.pos {
			// Only after an unclean election can a position fall inside a
			// batch; skip the records before it, as Kafka clients do.
			c.pos = b.LastOffset() + 1
			continue
		}
		if b.BaseOffset != c.pos {
			w.fail("%s: consumer at %d received batch at %d (offsets must be dense and increasing)", w.topics[c.part].name, c.pos, b.BaseOffset)
			return
		}
		w.check.consumed(c.part, b)
		c.pos = b.LastOffset() + 1
		w.stats.Consumed += int(b.NumRecords)
	}
}

// handleProduce is the broker's produce path.
func (b *broker) handleProduce(from int32, part int, req replica.ProduceRequest) {
	w := b.w
	bp := b.parts[part]
	if bp == nil || bp.r == nil {
		res := replica.ProduceResult{ID: req.ID, Acks: req.Acks, Error: replica.ErrNotLeaderOrFollower}
		w.net.send(b.id, from, func() { w.reqs[res.ID].result(res) })
		return
	}
	bp.r.Append(req)
	b.process(bp)
	b.maybeFlush(bp)
}

// onProduceResult checks an answer as it leaves the leader and sends it.
func (w *world) onProduceResult(b *broker, bp *bpart, res replica.ProduceResult) {
	p := w.reqs[res.ID]
	if p == nil {
		return
	}
	if res.Error == replica.ErrNone && p.cur != nil && p.attempt == res.ID {
		w.check.ackLeaves(b, bp, p.pid, p.cur, res)
	}
	if res.Acks == replica.AcksNone {
		return
	}
	w.net.send(b.id, p.id, func() { p.result(res) })
}

// handleConsume serves a consumer fetch: records below the HW only.
func (b *broker) handleConsume(from int32, part int, reqID uint64, pos int64) {
	w := b.w
	bp := b.parts[part]
	var res replica.FetchResult
	var batches []replica.Batch
	if bp == nil || bp.r == nil {
		res.Error = replica.ErrNotLeaderOrFollower
	} else {
		res = bp.r.HandleFetch(replica.FetchRequest{ReplicaID: -1, CurrentLeaderEpoch: -1, FetchOffset: pos, LastFetchedEpoch: -1})
		if res.Error == 0 {
			batches = bp.disk.read(res.From, res.To, 8)
			for i := range batches {
				if batches[i].LastOffset() >= res.HW {
					w.fail("%s@%d served offset %d at or above its HW %d", w.topics[part].name, b.id, batches[i].LastOffset(), res.HW)
				}
			}
		}
	}
	c := w.consumerByID(from)
	w.net.send(b.id, from, func() { c.result(reqID, res, batches) })
}

func (w *world) consumerByID(id int32) *consumer {
	for _, c := range w.clients {
		if cc, ok := c.(*consumer); ok && cc.id == id {
			return cc
		}
	}
	return nil
}
