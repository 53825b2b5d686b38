package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/batch"
	sbroker "github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/objstore"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/remote"
)

// Tiered storage (KIP-405) in the real-broker world (RealOptions.Tiered):
// realTieredTopic has remote.storage.enable, small segments and
// local.retention.bytes=1, so its leaders copy each rolled segment
// (wholly below the HW) to one in-memory object store the three brokers
// share, and every replica deletes its copied segments locally, the
// followers too. The brokers' remote log managers run in step mode
// (Broker.StepRemote): one more random step kind, whose metadata writes
// to __remote_log_metadata (one partition, RF 3, min ISR 2) wait for the
// followers' fetch steps like any acks=all produce; the ones sent to
// another broker cross the simulated network (simPeer, realnet.go). The
// store fails a share of its operations (its faults drawn from a seeded
// generator) until the settle phase. Checks:
//
//   - checkTiered: every acknowledged record of realTieredTopic whose
//     retention.ms has not passed is readable at its offset from the
//     current leader through its real Fetch handler (a consumer's fetch,
//     which reads the remote log below the local log start), from the log
//     start to the HW; every record read is the acknowledged one (or the
//     one a consumer read there) and no value is there twice;
//   - checkLocalCopied: whatever a replica holds neither locally nor below
//     the log start (its local log start above the log start) is in
//     COPY_SEGMENT_FINISHED segments of the committed remote log
//     metadata: local segments are deleted only once their copy finished;
//   - checkCopiedBelowHW: a finished segment holds only offsets below the
//     highest HW its leaders had.
//
// The "committed" remote log metadata is read from the log of
// __remote_log_metadata's leader up to its log end, not its HW: a new
// leader's HW may lag records committed under the last one, and reading
// more only makes the checks more lenient.

// realTieredTopic is the tiered topic; realTieredRetentionMs its
// retention.ms (the remote log manager's expiration deletes whole
// segments past it, raising the log start).
const (
	realTieredTopic       = "r0"
	realTieredRetentionMs = 4000
	// realTierStepP is the chance that a broker's step is StepRemote in
	// a tiered seed; realStoreErrorP the share of object store
	// operations that fail before the settle phase.
	realTierStepP = 0.08
	// realStorePartP the share of Puts cut off half way.
	realStoreErrorP = 0.03
	realStorePartP  = 0.02
	// realTierProduceP is the chance of one more produce to
	// realTieredTopic after a step, so that it rolls many segments.
	realTierProduceP = 0.15
	// realTieredSeeds: the seeds divisible by it are tiered in
	// TestRealSeeds (the others keep their traces).
	realTieredSeeds = 13
)

// realTierCalm: a tiered seed alternates this many steps with faults and
// as many without (nemesisAt), so that its logs commit and copy between
// storms (a storm's crashes leave few HWs moving).
const realTierCalm = 250

// nemesisAt reports whether step i of the run may inject faults: always,
// but in the calm windows of a tiered seed.
func (w *realWorld) nemesisAt(i int) bool {
	return !w.tier.on || (i/realTierCalm)%2 == 0
}

// calm starts a calm window: the links heal and the brokers down
// restart.
func (w *realWorld) calm() {
	w.tracef("calm: heal all, restart all")
	w.cut = map[[2]int32]bool{}
	w.cutFromController = map[int32]bool{}
	for _, rb := range w.brokers {
		if !rb.up {
			w.stats.Restarts++
			w.startBroker(rb)
		}
	}
}

// simTier is the tiered side of a realWorld.
type simTier struct {
	on    bool
	store *objstore.Faulty
	// faults are the store's faults outside checks.
	faults objstore.Faults
	// sent is when each value of realTieredTopic was first sent: its
	// record's timestamp is no older, so retention.ms lets it go no
	// earlier than retention.ms after that.
	sent map[string]time.Time
	// maxLogStart is the highest log start seen on any replica of
	// realTieredTopic: the records below it may be gone.
	maxLogStart int64
	// seen is each broker's last checked (log start, local log start) of
	// realTieredTopic: checkLocalCopied runs when one moves.
	seen map[int32][2]int64
	// remoteRead counts records checkTiered read below the leader's
	// local log start.
	remoteRead int
	// maxHW is the highest HW seen on a leader of realTieredTopic;
	// metaEnd the log end of __remote_log_metadata's leader when
	// checkCopiedBelowHW last ran.
	maxHW, metaEnd int64
}

func newSimTier(on bool, seed uint64) *simTier {
	t := &simTier{on: on, sent: map[string]time.Time{}, seen: map[int32][2]int64{}}
	if on {
		t.store = objstore.NewFaulty(&objstore.Memory{}, seed^0x7ea5)
		t.faults = objstore.Faults{ErrorRate: realStoreErrorP, PartialRate: realStorePartP}
		t.store.Set(t.faults)
	}
	return t
}

// tieredBrokerConfig turns tiered storage on in a broker's properties.
func tieredBrokerConfig(props map[string]string) {
	props["remote.log.storage.system.enable"] = "true"
	props["remote.log.metadata.topic.num.partitions"] = "1"
	props["remote.log.metadata.topic.replication.factor"] = "3"
	// A failing partition's task is retried after 50 ms, doubling up to
	// 500 ms (30 s by default: longer than a run).
	props["remote.log.manager.task.retry.backoff.ms"] = "50"
	props["remote.log.manager.task.retry.backoff.max.ms"] = "500"
}

// createTieredTopics creates __remote_log_metadata as the remote log
// manager would (its ensureTopic asks the controller, which a broker in
// step mode does not wait for) and the tiered topic.
func (w *realWorld) createTieredTopics() {
	cfgs := map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1", "min.insync.replicas": "2"}
	if err := w.brokers[0].b.CreateTopic(remote.MetadataTopic, 1, realBrokers, cfgs, false); err != nil {
		w.fail("create topic %s: %v", remote.MetadataTopic, err)
	}
	w.topics = append(w.topics, realTieredTopic)
	w.idem[realTieredTopic] = &idemProducer{pid: 1000 + int64(len(w.topics)-1)}
	cfgs = map[string]string{"min.insync.replicas": "2", "remote.storage.enable": "true", "segment.bytes": "512",
		"local.retention.bytes": "1", "local.retention.ms": "-2", "retention.ms": fmt.Sprint(realTieredRetentionMs), "retention.bytes": "-1"}
	if err := w.brokers[0].b.CreateTopic(realTieredTopic, 1, realBrokers, cfgs, false); err != nil {
		w.fail("create topic %s: %v", realTieredTopic, err)
	}
}

// brokerRand is the seeded source of a broker incarnation's random ids
// (sbroker.Options.Rand), nil outside tiered seeds.
func (w *realWorld) brokerRand() *rand.ChaCha8 {
	if !w.tier.on {
		return nil
	}
	var seed [32]byte
	for i := range 4 {
		v := w.rng.Uint64()
		for j := range 8 {
			seed[i*8+j] = byte(v >> (8 * j))
		}
	}
	return rand.NewChaCha8(seed)
}

// remoteStep runs one step of rb's remote log manager.
func (w *realWorld) remoteStep(rb *realBroker) {
	rb.b.StepRemote()
	w.stats.RemoteSteps++
	w.checkLocalCopied(false)
}

// storeFaults switches the object store's faults: on until the settle
// phase, with an outage now and then.
func (w *realWorld) storeFaults() {
	if !w.tier.on {
		return
	}
	t := w.tier
	switch {
	case w.settling:
		t.faults = objstore.Faults{}
	case w.chance(0.003):
		t.faults.Outage = !t.faults.Outage
		w.tracef("object store outage=%v", t.faults.Outage)
	default:
		return
	}
	t.store.Set(t.faults)
}

// noteSent records the first send of value to realTieredTopic.
func (w *realWorld) noteSent(topic, value string) {
	if topic != realTieredTopic {
		return
	}
	if _, ok := w.tier.sent[value]; !ok {
		w.tier.sent[value] = w.clk.Now()
	}
}

// tieredLeader returns realTieredTopic's current leader replica and its
// broker, if it is up and leads by the latest image.
func (w *realWorld) tieredLeader() (*realBroker, *sbroker.Partition) {
	leader := w.ctrl.image().Topics[realTieredTopic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up {
		return nil, nil
	}
	rb := w.brokers[leader-1]
	p, err := rb.b.PartitionBy(realTieredTopic, 0, time.Time{})
	if err != nil || !p.IsLeader() {
		return nil, nil
	}
	return rb, p
}

// fetchTiered is one consumer Fetch (v12, read_uncommitted, no wait) of
// realTieredTopic-0 from offset off through rb's real handler.
func (w *realWorld) fetchTiered(rb *realBroker, off int64) (kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = realTieredTopic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, off, 1<<20
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	l := protocol.NewLocal(rb.reg)
	defer l.Close()
	resp, err := l.Do("sim-tiered-consumer", req)
	if err != nil {
		return kmsg.FetchResponseTopicPartition{}, err
	}
	fr := resp.(*kmsg.FetchResponse)
	if fr.ErrorCode != 0 {
		return kmsg.FetchResponseTopicPartition{}, kerr.ErrorForCode(fr.ErrorCode)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		return kmsg.FetchResponseTopicPartition{}, fmt.Errorf("malformed fetch response")
	}
	return fr.Topics[0].Partitions[0], nil
}

// readTiered reads realTieredTopic-0 from rb's handler from from up to
// hw, calling fn with each record; it fails (returns an error naming
// the offset) when an offset in the range cannot be read.
func (w *realWorld) readTiered(rb *realBroker, from, hw int64, fn func(off int64, value string)) error {
	for off := from; off < hw; {
		fp, err := w.fetchTiered(rb, off)
		if err != nil {
			return fmt.Errorf("fetch at %d: %w", off, err)
		}
		if fp.ErrorCode != 0 {
			return fmt.Errorf("fetch at %d: %w", off, kerr.ErrorForCode(fp.ErrorCode))
		}
		next := off
		data := fp.RecordBatches
		for len(data) > 0 {
			h, one, rest, err := batch.Next(data)
			if err != nil {
				break // a partial batch at the end
			}
			data = rest
			if !h.IsControl() {
				if err := batch.Records(one, func(r batch.Record) bool {
					if o := h.BaseOffset + int64(r.OffsetDelta); o >= off && o < hw {
						fn(o, string(recordValue(r)))
					}
					return true
				}); err != nil {
					return fmt.Errorf("fetch at %d: a bad batch: %w", off, err)
				}
			}
			next = max(next, h.NextOffset())
		}
		if next == off {
			return fmt.Errorf("fetch at %d: no records below the HW %d", off, hw)
		}
		off = next
	}
	return nil
}

// tieredConsume is a consumer of realTieredTopic: a read through the
// leader's handler from where it stopped (below the local log start: the
// remote log), each record remembered (and checked against what it read
// before) for checkTiered.
func (w *realWorld) tieredConsume() {
	rb, p := w.tieredLeader()
	if rb == nil {
		return
	}
	topic := realTieredTopic
	from := max(w.next[topic], p.LogStartOffset())
	fp, err := w.fetchTiered(rb, from)
	if err != nil || fp.ErrorCode != 0 {
		return // store faults, a leader moving: the consumer retries
	}
	if w.consumed[topic] == nil {
		w.consumed[topic] = map[int64]string{}
	}
	next := from
	data := fp.RecordBatches
	for len(data) > 0 {
		h, one, rest, err := batch.Next(data)
		if err != nil {
			break
		}
		data = rest
		err = batch.Records(one, func(r batch.Record) bool {
			off, v := h.BaseOffset+int64(r.OffsetDelta), string(recordValue(r))
			if off < from {
				return true
			}
			if off >= fp.HighWatermark {
				w.fail("consumer of %s-0 on broker %d got offset %d at or above the HW %d", topic, rb.id, off, fp.HighWatermark)
				return false
			}
			if old, ok := w.consumed[topic][off]; ok && old != v {
				w.fail("consumer of %s-0 on broker %d read %q at %d, earlier %q", topic, rb.id, v, off, old)
				return false
			}
			w.consumed[topic][off] = v
			return true
		})
		if err != nil {
			w.fail("consumer of %s-0 on broker %d: a bad batch: %v", topic, rb.id, err)
			return
		}
		next = max(next, h.NextOffset())
	}
	w.next[topic] = next
}

// observeTiered notes the log starts of realTieredTopic's replicas.
func (w *realWorld) observeTiered() {
	for _, rb := range w.upBrokers() {
		if p, err := rb.b.PartitionBy(realTieredTopic, 0, time.Time{}); err == nil {
			w.tier.maxLogStart = max(w.tier.maxLogStart, p.LogStartOffset())
			if p.IsLeader() {
				w.tier.maxHW = max(w.tier.maxHW, p.HighWatermark())
			}
		}
	}
}

// mayBeGone reports whether retention may have removed the record of
// value from realTieredTopic: its retention.ms has passed, or it is below
// a log start seen.
func (w *realWorld) mayBeGone(off int64, value string) bool {
	sent, ok := w.tier.sent[value]
	return off < w.tier.maxLogStart || !ok || w.clk.Now().Sub(sent) > realTieredRetentionMs*time.Millisecond
}

// checkTiered: every acknowledged record of realTieredTopic not past its
// retention is readable at its offset through the leader's Fetch
// handler, from the log start up to the HW (see the top of the file).
func (w *realWorld) checkTiered() {
	if !w.tier.on {
		return
	}
	rb, p := w.tieredLeader()
	if rb == nil {
		return
	}
	w.observeTiered()
	topic := realTieredTopic
	ls, local, hw := p.LogStartOffset(), p.Log().LocalLogStartOffset(), p.HighWatermark()
	w.tier.store.Set(objstore.Faults{}) // the check is no client of a failing store
	got := map[int64]string{}
	at := map[string]int64{}
	err := w.readTiered(rb, ls, hw, func(off int64, v string) {
		if first, ok := at[v]; ok && first != off && w.failed == "" {
			w.fail("broker %d: %s-0 holds %q twice, at %d and %d (log start %d, local log start %d)", rb.id, topic, v, first, off, ls, local)
		}
		at[v], got[off] = off, v
		if off < local {
			w.tier.remoteRead++
		}
	})
	w.tier.store.Set(w.tier.faults)
	if w.failed != "" {
		return
	}
	if errors.Is(err, kerr.ReplicaNotAvailable) && !w.settling {
		// Not read its remote log metadata since it started: the
		// consumer retries (checked again later).
		return
	}
	if err != nil {
		w.fail("broker %d leads %s-0 (log start %d, local log start %d, HW %d) and cannot serve it: %v%s", rb.id, topic, ls, local, hw, err, w.describeRemote(rb, p))
		return
	}
	for _, a := range w.acked[topic] {
		v, ok := got[a.off]
		switch {
		case ok && v != a.value:
			w.fail("broker %d: %s-0@%d reads %q, acknowledged %q (log start %d, local log start %d)", rb.id, topic, a.off, v, a.value, ls, local)
			return
		case ok || a.off >= hw && !w.settling:
			// Read, or above a new leader's HW not yet caught up.
		case a.off < ls && w.mayBeGone(a.off, a.value):
		default:
			w.fail("broker %d leads %s-0 without acknowledged record %q at %d in any tier (log start %d, local log start %d, HW %d, sent %d ms ago)",
				rb.id, topic, a.value, a.off, ls, local, hw, w.clk.Now().Sub(w.tier.sent[a.value]).Milliseconds())
			return
		}
	}
	for off, v := range w.consumed[topic] {
		if g, ok := got[off]; ok && g != v {
			w.fail("broker %d: %s-0@%d reads %q, where a consumer read %q", rb.id, topic, off, g, v)
			return
		}
	}
}

// checkCopiedBelowHW: every COPY_SEGMENT_FINISHED segment of
// realTieredTopic holds only offsets below the highest HW any of its
// leaders had (a leader copies only segments wholly below its HW: above
// it, a new leader may truncate what the remote log holds). It runs when
// the metadata's log end moved.
func (w *realWorld) checkCopiedBelowHW() {
	if !w.tier.on || w.failed != "" {
		return
	}
	leader := w.ctrl.image().Topics[remote.MetadataTopic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up {
		return
	}
	mp, err := w.brokers[leader-1].b.PartitionBy(remote.MetadataTopic, 0, time.Time{})
	if err != nil || mp.LogEndOffset() == w.tier.metaEnd {
		return
	}
	w.tier.metaEnd = mp.LogEndOffset()
	w.observeTiered()
	c := w.committedRemoteLog()
	if c == nil {
		return
	}
	rb, p := w.tieredLeader()
	if rb == nil {
		return
	}
	for _, s := range c.Segments(p.RemotePartition()) {
		if s.EndOffset >= w.tier.maxHW {
			w.fail("a finished remote segment of %s-0 (%d-%d, copied by %d) holds offsets at or above %d, the highest HW its leaders had%s",
				realTieredTopic, s.StartOffset, s.EndOffset, s.BrokerID, w.tier.maxHW, w.describeRemote(rb, p))
			return
		}
	}
}

// committedRemoteLog is the remote log metadata of __remote_log_metadata
// as its leader's log holds it (nil without a leader up).
func (w *realWorld) committedRemoteLog() *remote.Cache {
	leader := w.ctrl.image().Topics[remote.MetadataTopic].Partitions[0].Leader
	if leader < 1 || !w.brokers[leader-1].up {
		return nil
	}
	p, err := w.brokers[leader-1].b.PartitionBy(remote.MetadataTopic, 0, time.Time{})
	if err != nil || !p.IsLeader() {
		return nil
	}
	c := &remote.Cache{}
	// Up to its log end: a new leader's HW may still be below records
	// committed under the last one.
	if err := readBatchRecords(p.Log(), p.Log().LogEndOffset(), func(_ int64, r batch.Record) bool {
		if rec, err := remote.Decode(r.Value); err == nil {
			_ = c.Apply(rec) // as a broker's cache, it skips what it cannot apply
		}
		return true
	}); err != nil {
		return nil
	}
	return c
}

// checkLocalCopied: each replica of realTieredTopic holds locally every
// offset from the log start up that no COPY_SEGMENT_FINISHED segment of
// the remote log metadata holds (see the top of the file). It runs when
// a replica's log start or local log start moved, or always with all.
func (w *realWorld) checkLocalCopied(all bool) {
	if !w.tier.on || w.failed != "" {
		return
	}
	w.observeTiered()
	var c *remote.Cache
	for _, rb := range w.upBrokers() {
		p, err := rb.b.PartitionBy(realTieredTopic, 0, time.Time{})
		if err != nil {
			continue
		}
		ls, local := p.LogStartOffset(), p.Log().LocalLogStartOffset()
		if now := [2]int64{ls, local}; w.tier.seen[rb.id] != now {
			w.tracef("broker %d: %s-0 starts at %d, locally at %d", rb.id, realTieredTopic, ls, local)
			w.tier.seen[rb.id] = now
		} else if !all {
			continue
		}
		from := max(ls, w.tier.maxLogStart)
		if from >= local {
			continue
		}
		if c == nil {
			if c = w.committedRemoteLog(); c == nil {
				return
			}
		}
		covered := from
		for _, s := range c.Segments(p.RemotePartition()) {
			if s.State == remote.CopyFinished && s.StartOffset <= covered && s.EndOffset >= covered {
				covered = s.EndOffset + 1
			}
		}
		if covered < local {
			w.fail("broker %d deleted %s-0 below its local log start %d, but the remote log's finished segments hold it only from %d to %d (log start %d)%s",
				rb.id, realTieredTopic, local, from, covered, ls, w.describeRemote(rb, p))
			return
		}
	}
}

// settleTiered is the settle phase's check of realTieredTopic: the
// leader serves every acknowledged record not past retention
// (checkTiered), every replica's local log holds the acknowledged
// records from its local log start at their offsets, and what no replica
// holds locally is in finished remote segments (checkLocalCopied).
func (w *realWorld) settleTiered() {
	w.checkTiered()
	if w.failed != "" {
		return
	}
	topic := realTieredTopic
	for _, rb := range w.brokers {
		p, err := rb.b.PartitionBy(topic, 0, time.Time{})
		if err != nil {
			w.fail("broker %d: %s-0: %v", rb.id, topic, err)
			return
		}
		l := p.Log()
		got := map[int64]string{}
		if err := readRecords(l, p.HighWatermark(), func(off int64, value []byte) bool {
			got[off] = string(value)
			return true
		}); err != nil {
			w.fail("broker %d: reading %s-0: %v", rb.id, topic, err)
			return
		}
		local := l.LocalLogStartOffset()
		for _, a := range w.acked[topic] {
			if a.off < local || a.off >= p.HighWatermark() {
				continue
			}
			if v, ok := got[a.off]; !ok || v != a.value {
				w.fail("after settling, broker %d's %s-0@%d holds %q (present %v), acknowledged %q (local log start %d)", rb.id, topic, a.off, v, ok, a.value, local)
				return
			}
		}
	}
	w.checkLocalCopied(true)
}

// describeRemote renders what rb's remote log metadata and the committed
// one hold of realTieredTopic, and p's leader epochs.
func (w *realWorld) describeRemote(rb *realBroker, p *sbroker.Partition) string {
	rp := p.RemotePartition()
	var b strings.Builder
	fmt.Fprintf(&b, "; epochs %v; broker %d's remote log:", p.Log().EpochEntries(), rb.id)
	for _, s := range rb.b.RemoteMetadata().Segments(rp) {
		fmt.Fprintf(&b, " [%d-%d %v]", s.StartOffset, s.EndOffset, s.LeaderEpochs)
	}
	b.WriteString("; metadata log:")
	if leader := w.ctrl.image().Topics[remote.MetadataTopic].Partitions[0].Leader; leader > 0 && w.brokers[leader-1].up {
		if mp, err := w.brokers[leader-1].b.PartitionBy(remote.MetadataTopic, 0, time.Time{}); err == nil {
			fmt.Fprintf(&b, " (leader %d HW %d)", leader, mp.HighWatermark())
			_ = readBatchRecords(mp.Log(), mp.Log().LogEndOffset(), func(off int64, r batch.Record) bool {
				rec, err := remote.Decode(r.Value)
				switch {
				case err != nil:
				case rec.Segment != nil:
					fmt.Fprintf(&b, " @%d add %x [%d-%d %v] by %d;", off, rec.Segment.ID[:2], rec.Segment.StartOffset, rec.Segment.EndOffset, rec.Segment.LeaderEpochs, rec.Segment.BrokerID)
				case rec.Update != nil:
					fmt.Fprintf(&b, " @%d %x %s by %d;", off, rec.Update.ID[:2], rec.Update.State, rec.Update.BrokerID)
				}
				return true
			})
		}
	}
	b.WriteString("; committed:")
	if c := w.committedRemoteLog(); c != nil {
		for _, s := range c.All(rp) {
			fmt.Fprintf(&b, " [%d-%d %v %s by %d]", s.StartOffset, s.EndOffset, s.LeaderEpochs, s.State, s.BrokerID)
		}
	}
	return b.String()
}
