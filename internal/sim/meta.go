package sim

import (
	"github.com/sluice-io/sluice/internal/epoch"
	prodstate "github.com/sluice-io/sluice/internal/producer"
	"github.com/sluice-io/sluice/internal/replica"
)

// A broker's metadata, as the real driver handles it (internal/broker
// reconcile): images arrive from the controller (pushed on every change,
// and with heartbeat answers) and are applied in metadata log order; the
// broker keeps its metadata log across crashes and replays it on restart.
// A restarted broker acts on metadata (creates its replicas from disk and
// hands them partition states) only once an image holds this incarnation's
// own registration: images before it are history, and one can name the
// broker leader of an epoch that has long ended (sluice 3369e98). The
// bugs.actOnReplayedMetadata switch restores the old behaviour: replicas
// are created at restart (broker epoch -1, as the old reconcile did before
// registration) and every replayed and received image is acted on.

// metaLogKeep is how many images a broker's metadata log replays.
const metaLogKeep = 8

// receiveMetadata takes an image from the controller.
func (b *broker) receiveMetadata(im *image) {
	if b.meta != nil && im.offset <= b.meta.offset {
		return // already applied: the log only moves forward
	}
	b.meta = im
	b.metaLog = append(b.metaLog, im)
	if len(b.metaLog) > metaLogKeep {
		b.metaLog = append(b.metaLog[:0], b.metaLog[len(b.metaLog)-metaLogKeep:]...)
	}
	b.maybeCatchUp()
	if b.caughtUp || b.w.opts.bugs.actOnReplayedMetadata {
		b.act(im)
	}
}

// maybeCatchUp starts acting on metadata once the image holds this
// incarnation's registration. The image may arrive before the answer to
// the registration does, so registered calls it too.
func (b *broker) maybeCatchUp() {
	if b.caughtUp || b.epoch == 0 || b.meta == nil || b.meta.brokerEpochs[b.id-1] != b.epoch {
		return
	}
	b.caughtUp = true
	b.w.tracef("broker %d caught up with metadata at offset %d", b.id, b.meta.offset)
}

// registered is the controller's answer to register.
func (b *broker) registered(epochNum int64) {
	if b.epoch != 0 {
		return
	}
	b.epoch = epochNum
	b.w.tracef("broker %d registered, epoch %d", b.id, epochNum)
	if b.maybeCatchUp(); b.caughtUp {
		b.act(b.meta)
	}
}

// replayMetadata is the restart's replay of the metadata log. Only with
// bugs.actOnReplayedMetadata does it do anything: each image is acted on,
// a couple of milliseconds apart, as the old reconcile did while the log
// replayed.
func (b *broker) replayMetadata(inc int) {
	if !b.w.opts.bugs.actOnReplayedMetadata {
		return
	}
	for i, im := range b.metaLog {
		b.w.at(int64(1+2*i), func() {
			if b.alive && b.incarnation == inc {
				b.w.tracef("broker %d replays metadata offset %d", b.id, im.offset)
				b.act(im)
			}
		})
	}
}

// act hands an image's partition states to the replicas, creating them
// from disk first.
func (b *broker) act(im *image) {
	if im == nil {
		return
	}
	for p, st := range im.parts {
		bp := b.parts[p]
		if bp == nil {
			continue
		}
		if bp.r == nil {
			b.recover(bp)
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

// recover builds a replica from its disk: log, epoch checkpoint, HW
// checkpoint and producer state. Its broker epoch is the registered one
// (-1 before registration, as the old reconcile had it).
func (b *broker) recover(bp *bpart) {
	w := b.w
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
	be := b.epoch
	if be == 0 {
		be = -1
	}
	t := &w.topics[bp.p]
	bp.r = replica.New(replica.Config{ID: b.id, BrokerEpoch: be, Partition: t.name, MinISR: t.minISR, LagTimeMaxMs: lagTimeMs,
		DropQueuedProposal: w.opts.bugs.dropQueuedISR},
		replica.LogState{LEO: d.leo(), HW: d.hw, Epochs: c, Producers: ps})
	bp.r.Tick(w.now)
	w.check.started(b.id, bp.p, bp.r)
	if w.opts.Verbose {
		w.tracef("recovered %s", bp.r)
	}
	b.process(bp) // persists the recovered epoch cache
}
