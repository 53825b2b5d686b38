package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	"github.com/sluice-io/sluice/internal/batch/batchtest"
	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/group"
	"github.com/sluice-io/sluice/internal/handler"
	"github.com/sluice-io/sluice/internal/remote"
	"github.com/sluice-io/sluice/internal/replica"
	"github.com/sluice-io/sluice/internal/sharecoord"
	"github.com/sluice-io/sluice/internal/txn"
)

// The real transaction coordinator under the simulator. Every broker runs
// internal/txn in its stepped mode (txn.Options.Stepped) over its replicas
// of __transaction_state (one partition, RF 3, min ISR 2, compacted,
// created at the start): the shard of the partition's
// leader loads by replaying it, appends each transition through the
// replica and answers once the high watermark passes it, rolls back a
// write whose commit failed, rolls a prepared transaction forward when a
// new leader loads it, aborts a transaction open longer than its timeout.
// The simulator steps every up broker's coordinator whenever the
// transaction workload moves (stepCoords) and delivers the coordinator's
// WriteTxnMarkers requests (simMarkers): to the leader's
// Partition.WriteMarker across the simulated network, answered once each
// marker is replicated; a request may be lost, its answer lost, or held
// and delivered late (a request stuck in a paused broker).
//
// The producer is a client: FindCoordinator against any up broker, then
// InitProducerId, AddPartitionsToTxn, its transactional batches to the
// partitions' leaders and EndTxn to the coordinator, retrying retriable
// errors and lost answers (the coordinator crashed) as a client does, and
// starting over with InitProducerId after a fatal one (its epoch was
// fenced, by a timeout abort or otherwise).

const (
	realTxnID        = "sim-txn"
	realTxnTimeoutMs = 2500
	realTxnRetry     = 50 * time.Millisecond
	realFirstPID     = 5000
)

type txnPhase int8

const (
	txnIdle txnPhase = iota
	txnInit
	txnAdding
	txnProducing
	txnEnding
)

// simTxn is the transactional producer and the world's side of the
// coordinators.
type simTxn struct {
	pid   int64 // -1 until InitProducerId answered
	epoch int16
	tv2   bool // transaction version 2 (even seeds): EndTxn bumps the epoch (KIP-890 part 2)

	n        int // current transaction number
	phase    txnPhase
	values   map[string]string // topic → the value written there
	seq      map[string]int32  // next sequence per topic, for pid/epoch
	inflight int               // produces not answered yet
	doubtful bool              // a produce failed or went unanswered
	commit   bool
	// req is the request in flight to a coordinator; retryAt holds the
	// next one back.
	req     *coordReq
	retryAt time.Time
	lastCo  int32 // the coordinator of the last request

	// decided maps the values of every transaction the producer ended
	// to whether it asked to commit; acked holds those whose commit was
	// answered, asked the values of each transaction whose commit was
	// asked and not answered (all or none may be committed).
	decided map[string]bool
	acked   map[string]bool
	asked   map[int][]string

	// openChecks counts checkOpenTxns calls on changed logs, and
	// openChecked holds the log end and truncation generation each log
	// had at its last compare.
	openChecks  int
	openChecked map[string][2]int64

	coords  map[int32]*txn.Coordinator // each up broker's
	nextPID int64
	markers []*markerReq // WriteTxnMarkers being written
	late    []lateMarkers
	// replay is the last marker request a coordinator sent (transaction
	// version 2), delivered once more while the next transaction writes.
	replay *lateMarkers

	// stableShown is the highest LSO a read_committed Fetch answered
	// with, per topic (reallso.go).
	stableShown map[string]int64
}

// coordReq is a request to the coordinator on node: poll applies its
// answer once there and reports whether it was.
type coordReq struct {
	node int32
	poll func() bool
}

// markerReq is a WriteTxnMarkers request being served on node: each
// partition's write, answered once all are replicated.
type markerReq struct {
	from, node int32
	resp       *kmsg.WriteTxnMarkersResponse
	writes     []markerWrite
	done       func(*kmsg.WriteTxnMarkersResponse, error)
}

type markerWrite struct {
	ch   <-chan replica.ProduceResult
	slot *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
}

// lateMarkers is a request held to be delivered at at.
type lateMarkers struct {
	node int32
	req  *kmsg.WriteTxnMarkersRequest
	at   time.Time
	// src and dst are the sending and receiving brokers' processes: a
	// request held on a connection dies with either (a crash or restart
	// closes the connection), so it is delivered only while both run.
	src, dst *sbroker.Broker
}

// alive reports whether l's connection still stands: both its brokers
// up, in the processes that sent and received it.
func (w *realWorld) alive(l lateMarkers) bool {
	from, to := w.brokers[l.src.NodeID()-1], w.brokers[l.node-1]
	return from.up && to.up && from.b == l.src && to.b == l.dst
}

type pendingTxn struct {
	broker int32
	topic  string
	n      int // the transaction it belongs to
	ch     <-chan replica.ProduceResult
}

func newSimTxn() *simTxn {
	return &simTxn{pid: -1, seq: map[string]int32{}, decided: map[string]bool{}, acked: map[string]bool{},
		asked: map[int][]string{}, coords: map[int32]*txn.Coordinator{}, nextPID: realFirstPID}
}

// registerHandlers installs rb's request handlers with a stepped
// transaction coordinator.
func (w *realWorld) registerHandlers(rb *realBroker) *handler.Handlers {
	c := txn.New(rb.b, txn.Options{Config: txn.Config{
		NumPartitions: 1, ReplicationFactor: realBrokers, MinISR: 2, SegmentBytes: 4096,
		MaxTimeout: time.Minute, IDExpiration: time.Hour, AbortInterval: 500 * time.Millisecond,
		RemoveInterval: time.Hour, OffsetsPartitions: 1,
	}, Stepped: true, StepMarkers: simMarkers{w: w, from: rb.id}, Knobs: w.opts.txnKnobs})
	w.txn.coords[rb.id] = c
	opts := handler.OptionsFromConfig(rb.b.Config())
	opts.Txn = c
	opts.Groups = w.newGroupCoordinator(rb)
	opts.StepShareExpiry = true // shareExpiry, on the simulator's clock
	if !w.shr.on {
		return handler.RegisterWith(rb.reg, rb.b, opts)
	}
	opts.ShareCoordinator = w.newShareCoordinator(rb)
	opts.SharePersister = simSharePersister{w: w, from: rb.id}
	opts.WatchShareConn = w.watchShareConn
	h := handler.RegisterWith(rb.reg, rb.b, opts)
	h.SharePartitions().SetKnobs(w.opts.shareKnobs)
	return h
}

// createTxnTopic creates __transaction_state as the coordinator would
// (a stepped one does not: the creation waits for the metadata).
func (w *realWorld) createTxnTopic() {
	cfgs := map[string]string{"cleanup.policy": "compact", "retention.ms": "-1", "segment.bytes": "4096", "min.insync.replicas": "2"}
	if err := w.brokers[0].b.CreateTopic(txn.Topic, 1, realBrokers, cfgs, false); err != nil {
		w.fail("create topic %s: %v", txn.Topic, err)
	}
}

// coordTopics are the coordinators' internal topics: a disk is wiped
// only where no committed record of theirs is lost either (maybeWipe).
func (w *realWorld) coordTopics() []string {
	ts := []string{txn.Topic, group.OffsetsTopic}
	if w.shr.on {
		ts = append(ts, sharecoord.Topic)
	}
	if w.tier.on {
		ts = append(ts, remote.MetadataTopic)
	}
	return ts
}

// allocatePID is the simulated controller's AllocateProducerID.
func (w *realWorld) allocatePID(id int32) (int64, error) {
	if w.clk.Now().Before(w.ctrl.downUntil) || w.cutFromController[id] {
		return 0, kerr.CoordinatorNotAvailable
	}
	w.txn.nextPID++
	return w.txn.nextPID, nil
}

// stepCoords runs the ready work of every up broker's coordinator.
func (w *realWorld) stepCoords() {
	for _, rb := range w.brokers {
		if c := w.txn.coords[rb.id]; rb.up && c != nil {
			c.Drain()
		}
	}
}

// coordinator finds the transactional id's coordinator as a client does:
// FindCoordinator to an up broker, then that broker if it is up.
func (w *realWorld) coordinator() (int32, *txn.Coordinator) {
	up := w.upBrokers()
	if len(up) == 0 {
		return -1, nil
	}
	c := w.txn.coords[up[w.rng.IntN(len(up))].id]
	if c == nil {
		return -1, nil
	}
	node, err := c.Coordinator(realTxnID)
	if err != nil || node < 1 || node > realBrokers || !w.brokers[node-1].up || w.txn.coords[node] == nil {
		return -1, nil
	}
	if w.txn.lastCo != 0 && w.txn.lastCo != node {
		w.stats.TxnFailovers++
	}
	w.txn.lastCo = node
	return node, w.txn.coords[node]
}

// poll wraps a coordinator Result for coordReq.
func poll[T any](r txn.Result[T], apply func(T)) func() bool {
	return func() bool {
		if r.Wait == nil {
			apply(r.Resp)
			return true
		}
		v, ok := r.Poll()
		if ok {
			apply(v)
		}
		return ok
	}
}

// retriable reports a coordinator error a client retries as is.
func retriable(e *kerr.Error) bool {
	switch e {
	case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.ConcurrentTransactions:
		return true
	}
	return false
}

// txnStep moves the transaction workload one step; start says whether a
// new transaction may begin.
func (w *realWorld) txnStep(start bool) {
	w.stepCoords()
	w.groupStep(start)
	tx := w.txn
	if tx.req != nil || w.clk.Now().Before(tx.retryAt) {
		return
	}
	switch tx.phase {
	case txnIdle:
		if !start {
			return
		}
		if tx.pid < 0 {
			tx.phase = txnInit
			w.txnInit()
			return
		}
		tx.n++
		tx.values, tx.doubtful, tx.inflight = map[string]string{}, false, 0
		for _, topic := range w.txnTopics {
			if len(tx.values) > 0 && w.chance(0.3) {
				continue
			}
			tx.values[topic] = fmt.Sprintf("x%d-%s", tx.n, topic)
		}
		tx.phase = txnAdding
		w.txnAdd()
	case txnInit:
		w.txnInit()
	case txnAdding:
		w.txnAdd()
	case txnProducing:
		w.replayMarkers()
		if tx.inflight > 0 {
			return
		}
		tx.commit = !tx.doubtful && w.chance(0.7)
		for _, v := range tx.values {
			tx.decided[v] = tx.commit
		}
		if tx.commit {
			tx.asked[tx.n] = sortedValues(tx.values)
		}
		w.tracef("txn %d ends: commit=%v", tx.n, tx.commit)
		tx.phase = txnEnding
		w.txnEnd()
	case txnEnding:
		w.txnEnd()
	}
}

// send sends a request to the coordinator, or holds the producer back a
// little if there is none.
func (w *realWorld) send(what string, do func(c *txn.Coordinator) func() bool) {
	node, c := w.coordinator()
	if c == nil {
		w.txn.retryAt = w.clk.Now().Add(realTxnRetry)
		return
	}
	w.tracef("txn %d: %s to coordinator %d (pid %d epoch %d)", w.txn.n, what, node, w.txn.pid, w.txn.epoch)
	w.txn.req = &coordReq{node: node, poll: do(c)}
	w.collectCoord()
}

// retry holds the current request back before it goes again.
func (w *realWorld) retry(what string, e *kerr.Error) {
	w.tracef("txn %d: %s: %v, retrying", w.txn.n, what, e)
	w.txn.retryAt = w.clk.Now().Add(realTxnRetry)
}

// reinit starts over with InitProducerId after a fatal error: a
// transaction whose commit was asked stays undecided (asked), any other
// is aborted by the epoch bump.
func (w *realWorld) reinit(what string, e *kerr.Error) {
	tx := w.txn
	w.tracef("txn %d: %s: %v, the producer starts over", tx.n, what, e)
	if tx.phase == txnAdding || tx.phase == txnProducing || (tx.phase == txnEnding && !tx.commit) {
		for _, v := range tx.values {
			tx.decided[v] = false
		}
	}
	tx.phase, tx.pid = txnInit, -1
}

func (w *realWorld) txnInit() {
	tx := w.txn
	w.send("InitProducerId", func(c *txn.Coordinator) func() bool {
		return poll(c.InitProducerID(realTxnID, realTxnTimeoutMs, -1, -1), func(r txn.InitResult) {
			switch {
			case r.Err == nil:
				tx.pid, tx.epoch, tx.phase = r.ProducerID, r.Epoch, txnIdle
				clear(tx.seq)
				w.tracef("txn producer: pid %d epoch %d", tx.pid, tx.epoch)
			default:
				w.retry("InitProducerId", r.Err)
			}
		})
	})
}

func (w *realWorld) txnAdd() {
	tx := w.txn
	var parts []txn.Partition
	for _, topic := range sortedKeys(keysOf(tx.values)) {
		parts = append(parts, txn.Partition{Topic: topic, Partition: 0})
	}
	w.send("AddPartitionsToTxn", func(c *txn.Coordinator) func() bool {
		return poll(c.AddPartitions(realTxnID, tx.pid, tx.epoch, parts), func(e *kerr.Error) {
			switch {
			case e == nil:
				tx.phase = txnProducing
				w.txnProduce()
			case retriable(e):
				w.retry("AddPartitionsToTxn", e)
			default:
				w.reinit("AddPartitionsToTxn", e)
			}
		})
	})
}

// txnProduce sends the transaction's batches to the partitions' leaders.
func (w *realWorld) txnProduce() {
	tx := w.txn
	for _, topic := range sortedKeys(keysOf(tx.values)) {
		leader, p := w.txnLeader(topic)
		if p == nil {
			tx.doubtful = true // the producer cannot send it: it aborts
			continue
		}
		data := batchtest.Build(batchtest.Options{Transactional: true, ProducerID: tx.pid, ProducerEpoch: tx.epoch,
			BaseSequence: tx.seq[topic], BaseTimestamp: w.clk.Now().UnixMilli()}, batchtest.Values(tx.values[topic]))
		tx.seq[topic]++
		h, _ := batch.ParseHeader(data)
		tx.inflight++
		w.txnPending = append(w.txnPending, pendingTxn{broker: leader, topic: topic, n: tx.n,
			ch: p.Produce(data, h, -1, w.clk.Now().Add(realProduceDeadline))})
	}
	w.tracef("txn %d (pid %d epoch %d) writes %v", tx.n, tx.pid, tx.epoch, tx.values)
}

func (w *realWorld) txnEnd() {
	tx := w.txn
	tv := int16(1)
	if tx.tv2 {
		tv = 2
	}
	w.send(fmt.Sprintf("EndTxn(commit=%v)", tx.commit), func(c *txn.Coordinator) func() bool {
		return poll(c.EndTxn(realTxnID, tx.pid, tx.epoch, tx.commit, tv), func(r txn.EndResult) {
			switch {
			case r.Err == nil:
				w.tracef("txn %d ended (commit=%v)", tx.n, tx.commit)
				w.checkEndDurable(tx.req.node, tx.commit)
				if tx.commit {
					w.stats.TxnCommitted++
					for _, v := range tx.values {
						tx.acked[v] = true
					}
					delete(tx.asked, tx.n)
				} else {
					w.stats.TxnAborted++
				}
				if tx.tv2 && (r.ProducerID != tx.pid || r.Epoch != tx.epoch) {
					tx.pid, tx.epoch = r.ProducerID, r.Epoch
					clear(tx.seq)
				}
				tx.phase = txnIdle
				if tx.doubtful && !tx.tv2 {
					// A batch may have failed with its sequence lost:
					// the producer bumps its epoch (KIP-360; transaction
					// version 2 bumped it already).
					tx.pid = -1
				}
			case retriable(r.Err):
				w.retry("EndTxn", r.Err)
			default:
				w.reinit("EndTxn", r.Err)
			}
		})
	})
}

// checkEndDurable: an answered EndTxn's decision is committed on its
// coordinator: a replay of the coordinator's __transaction_state replica
// below its HW (what a coordinator elected now loads) has the id prepared
// or complete in that direction. Kafka answers EndTxn only once
// PrepareCommit or PrepareAbort is replicated. A retry too: it is answered
// from the committed state, never from records a new coordinator loaded
// above its HW (docs/coordinators.md).
func (w *realWorld) checkEndDurable(node int32, commit bool) {
	p, err := w.brokers[node-1].b.PartitionBy(txn.Topic, 0, time.Time{})
	if !w.brokers[node-1].up || err != nil {
		return
	}
	ids, _ := txn.ReadLog(p.Log(), p.LogStartOffset(), p.HighWatermark())
	m, ok := ids[realTxnID]
	want := [2]txn.State{txn.PrepareAbort, txn.CompleteAbort}
	if commit {
		want = [2]txn.State{txn.PrepareCommit, txn.CompleteCommit}
	}
	if !ok || (m.State != want[0] && m.State != want[1]) {
		w.fail("txn %d: EndTxn(commit=%v) answered by coordinator %d while its committed state (below HW %d) is %v", w.txn.n, commit, node, p.HighWatermark(), m.State)
	}
}

// collectCoord applies the coordinator's answer if it is there.
func (w *realWorld) collectCoord() {
	if r := w.txn.req; r != nil && r.poll() {
		if w.txn.req == r {
			w.txn.req = nil
		}
	}
}

// collectTxn takes the transactional answers that arrived: the
// producer's batches, the coordinator's, the markers'.
func (w *realWorld) collectTxn() {
	kept := w.txnPending[:0]
	for _, pt := range w.txnPending {
		select {
		case res := <-pt.ch:
			w.txnProduced(pt, res.Error)
		default:
			kept = append(kept, pt)
		}
	}
	w.txnPending = kept
	w.collectCoord()
	w.collectMarkers()
}

// txnProduced applies an answer to a transactional batch; code -1 is an
// answer lost with its broker.
func (w *realWorld) txnProduced(pt pendingTxn, code int16) {
	if pt.n != w.txn.n || w.txn.phase != txnProducing {
		return
	}
	w.txn.inflight--
	if code != 0 {
		w.txn.doubtful = true
	}
}

// crashTxn loses what a crashed broker will never answer: the producer's
// batches, the request to its coordinator (retried elsewhere), the marker
// requests it serves or sent.
func (w *realWorld) crashTxn(id int32) {
	kept := w.txnPending[:0]
	var lost []pendingTxn
	for _, pt := range w.txnPending {
		if pt.broker == id {
			lost = append(lost, pt)
		} else {
			kept = append(kept, pt)
		}
	}
	w.txnPending = kept
	for _, pt := range lost {
		w.txnProduced(pt, -1)
	}
	if r := w.txn.req; r != nil && r.node == id {
		w.txn.req = nil
		w.tracef("txn %d: the coordinator %d crashed before answering", w.txn.n, id)
	}
	delete(w.txn.coords, id)
	w.crashGroup(id)
	mk := w.txn.markers[:0]
	for _, m := range w.txn.markers {
		switch {
		case m.node == id:
			m.done(nil, errUnreachable)
		case m.from != id:
			mk = append(mk, m)
		}
	}
	w.txn.markers = mk
}

// txnQuiet reports that no transaction is under way: the producer is
// idle and no leader of a transactional topic has one of its
// transactions open.
func (w *realWorld) txnQuiet() bool {
	if w.txn.phase != txnIdle || w.txn.req != nil || len(w.txn.markers) > 0 {
		return false
	}
	for _, topic := range w.txnTopics {
		if _, p := w.txnLeader(topic); p == nil || len(p.OpenTransactions()) > 0 {
			return false
		}
	}
	return true
}

// simMarkers delivers a broker's coordinator's WriteTxnMarkers across the
// simulated network (txn.StepSender).
type simMarkers struct {
	w    *realWorld
	from int32
}

// Send implements txn.StepSender.
func (s simMarkers) Send(node int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
	w := s.w
	if node < 1 || node > realBrokers || !w.brokers[node-1].up || !w.brokers[s.from-1].up ||
		w.cut[[2]int32{s.from, node}] || (!w.settling && w.chance(realDropP)) {
		done(nil, errUnreachable)
		return
	}
	if w.txn.tv2 && !w.settling && w.chance(0.05) {
		// Held somewhere (a paused broker) and delivered late; the
		// coordinator's request times out meanwhile. (Only under
		// transaction version 2: before it, a late marker of the same
		// producer epoch ends whatever transaction is open, in Kafka
		// too, the weakness KIP-890 fixes.)
		w.txn.late = append(w.txn.late, lateMarkers{node: node, req: req, at: w.clk.Now().Add(time.Duration(50+w.rng.IntN(1000)) * time.Millisecond),
			src: w.brokers[s.from-1].b, dst: w.brokers[node-1].b})
		done(nil, context.DeadlineExceeded)
		return
	}
	w.writeMarkers(s.from, node, req, done)
}

// writeMarkers serves a WriteTxnMarkers request on node as its handler
// does: each marker appended to the partition it leads, answered once all
// are replicated (acks=all).
func (w *realWorld) writeMarkers(from, node int32, req *kmsg.WriteTxnMarkersRequest, done func(*kmsg.WriteTxnMarkersResponse, error)) {
	if from != 0 && w.txn.tv2 {
		w.txn.replay = &lateMarkers{node: node, req: req, src: w.brokers[from-1].b, dst: w.brokers[node-1].b}
	}
	rb := w.brokers[node-1]
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	mr := &markerReq{from: from, node: node, resp: resp, done: done}
	for _, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		data := batch.EncodeMarker(m.ProducerID, m.ProducerEpoch, batch.Marker{Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}, w.clk.Now().UnixMilli())
		for _, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, part := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = part
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
		last := &resp.Markers[len(resp.Markers)-1]
		for ti, t := range m.Topics {
			for pi, part := range t.Partitions {
				slot := &last.Topics[ti].Partitions[pi]
				p, err := rb.b.LeaderBy(t.Topic, part, time.Time{})
				if err != nil {
					slot.ErrorCode = kerr.NotLeaderForPartition.Code
					continue
				}
				w.tracef("marker pid %d epoch %d commit=%v coordinator epoch %d tv %d to %s-%d on %d (from %d)", m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion, t.Topic, part, node, from)
				mr.writes = append(mr.writes, markerWrite{slot: slot,
					ch: p.WriteMarker(data, w.clk.Now().Add(realProduceDeadline), m.TransactionVersion >= 2)})
			}
		}
	}
	w.txn.markers = append(w.txn.markers, mr)
}

// collectMarkers answers the marker requests whose writes are all done,
// and delivers the late ones whose time came.
func (w *realWorld) collectMarkers() {
	now := w.clk.Now()
	late := w.txn.late[:0]
	var due []lateMarkers
	for _, l := range w.txn.late {
		if now.Before(l.at) {
			late = append(late, l)
		} else {
			due = append(due, l)
		}
	}
	w.txn.late = late
	for _, l := range due {
		if w.alive(l) {
			w.stats.TxnLateMarkers++
			w.writeMarkers(0, l.node, l.req, func(*kmsg.WriteTxnMarkersResponse, error) {})
		}
	}
	kept := w.txn.markers[:0]
	var answered []*markerReq
	for _, m := range w.txn.markers {
		open := m.writes[:0]
		for _, wr := range m.writes {
			select {
			case res := <-wr.ch:
				wr.slot.ErrorCode = res.Error
			default:
				open = append(open, wr)
			}
		}
		m.writes = open
		if len(open) > 0 {
			kept = append(kept, m)
		} else {
			answered = append(answered, m)
		}
	}
	w.txn.markers = kept
	for _, m := range answered {
		if !w.settling && w.chance(realDropP) {
			m.done(nil, errUnreachable) // the answer is lost
			continue
		}
		m.done(m.resp, nil)
	}
}

// replayMarkers delivers the previous transaction's last marker request
// once more, on one step in two while the next transaction writes, while
// settling too (transaction version 2: the partition must refuse it).
func (w *realWorld) replayMarkers() {
	r := w.txn.replay
	if r == nil || !w.chance(0.5) {
		return
	}
	w.txn.replay = nil
	if w.alive(*r) {
		w.stats.TxnLateMarkers++
		w.tracef("txn %d: the previous marker request delivered late to %d", w.txn.n, r.node)
		w.writeMarkers(0, r.node, r.req, func(*kmsg.WriteTxnMarkersResponse, error) {})
	}
}

// keysOf is the set of m's keys.
func keysOf(m map[string]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// sortedValues is m's values in key order.
func sortedValues(m map[string]string) []string {
	var out []string
	for _, k := range sortedKeys(keysOf(m)) {
		out = append(out, m[k])
	}
	return out
}
