package controller

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/internal/metadata"
)

// Fast failure detection (docs/controller.md, "Failover").
//
// broker.session.timeout.ms (9 s) is how long the active controller waits
// for a silent broker: it cannot tell a dead process from a paused or
// overloaded one by silence alone. A dead process is told apart by what
// its kernel does: when a process dies, its kernel closes its sockets, so
// its connections to the controller end at once (FIN or RST) and its
// listening socket is gone, so a new connection to its Kafka listener is
// refused (RST) at once. A paused (SIGSTOP, GC-stalled) or overloaded
// process keeps both: its connections stay open and its kernel still
// completes the handshake of a new connection to its listener.
//
// So a broker becomes a suspect when a controller RPC connection that
// carried its heartbeats ends, or, for every other broker, when a
// controller starts a term (the new controller has no connection from
// anyone yet, and the old one may be the process that died). While a
// broker is a suspect, the controller dials its inter-broker listener
// (Host:Port of its registration, the address followers and clients use
// to reach it) at once and then every tick; a dial refused with
// ECONNREFUSED fences it, as an expired session would. Any other outcome
// (connected, timed out, unreachable) changes nothing: the session rule
// still applies. A heartbeat clears the suspicion.

// probeTimeout bounds one dial of a suspect's listener.
const probeTimeout = time.Second

// brokerProbes is how many times, 50 ms apart, one probe of a suspect
// dials its listener before leaving it to the next tick.
const brokerProbes = 5

// suspicion is why and since when the active controller doubts a broker.
type suspicion struct {
	since time.Time
	why   string
}

// dialProbe is the production probe: a TCP dial of addr, closed at once.
func dialProbe(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: probeTimeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// refused reports whether a probe's error says nothing listens at the
// address: the kernel answered the handshake with a reset.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// suspectLocked (a.mu held) starts doubting broker id, unless it is this
// voter (alive by definition) or already a suspect.
func (a *active) suspectLocked(id int32, why string) {
	if a.n.voter && id == a.n.cfg.NodeID {
		return
	}
	if _, ok := a.suspect[id]; !ok {
		a.suspect[id] = suspicion{since: a.now(), why: why}
	}
}

// connLost is called when a controller RPC connection that carried broker
// id's heartbeats ends: the broker becomes a suspect and is probed at once.
func (a *active) connLost(id int32) {
	a.mu.Lock()
	if !a.on {
		a.mu.Unlock()
		return
	}
	a.suspectLocked(id, "its heartbeat connection closed")
	a.mu.Unlock()
	a.probeSuspects()
}

// probeSuspects starts a probe of every suspect that is registered,
// unfenced and not already being probed. Without a probe function (a
// Machine) it does nothing.
func (a *active) probeSuspects() {
	im := a.n.st.Image()
	a.mu.Lock()
	defer a.mu.Unlock()
	probe := a.probe
	if !a.on || probe == nil {
		return
	}
	for id, s := range a.suspect {
		br, ok := im.Brokers[id]
		if !ok || br.Fenced || a.probing[id] || br.Host == "" || br.Port <= 0 {
			continue
		}
		a.probing[id] = true
		go a.probeOne(probe, br, s, a.gen)
	}
}

// probeOne dials a suspect's listener and fences it if the dial is
// refused and it is still the same suspect: same broker epoch, unfenced,
// no heartbeat since the suspicion began, same term.
func (a *active) probeOne(probe func(context.Context, string) error, br metadata.Broker, s suspicion, gen uint64) {
	addr := net.JoinHostPort(br.Host, strconv.Itoa(int(br.Port)))
	same := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		cur, still := a.suspect[br.ID]
		return still && cur.since.Equal(s.since) && a.gen == gen && a.on
	}
	// A dying process's kernel may close its connections a moment before
	// its listening socket: in the first second of a suspicion a probe
	// that connects is tried again a few times, 50 ms apart; later ones
	// dial once (the decision loop's tick probes again).
	tries := brokerProbes
	if a.now().Sub(s.since) > time.Second {
		tries = 1
	}
	var err error
	for try := 0; try < tries; try++ {
		if err = probe(a.n.baseCtx, addr); refused(err) || !same() || !sleepCtx(a.n.baseCtx, 50*time.Millisecond) {
			break
		}
	}
	still := same()
	a.mu.Lock()
	delete(a.probing, br.ID)
	a.mu.Unlock()
	if !still || !refused(err) {
		return
	}
	a.decideSplit(a.n.baseCtx, func(im *metadata.Image, b *batch) error {
		now, ok := im.Brokers[br.ID]
		a.mu.Lock()
		cur, still := a.suspect[br.ID]
		a.mu.Unlock()
		if !ok || now.Fenced || now.Epoch != br.Epoch || !still || !cur.since.Equal(s.since) {
			return nil
		}
		a.n.log.Info("fencing broker: "+s.why+" and its listener refuses connections", "broker", br.ID, "epoch", br.Epoch, "addr", addr,
			"after", a.now().Sub(s.since).Round(time.Millisecond))
		b.addLast(record{Type: recFence, ID: br.ID, Epoch: br.Epoch})
		a.removeBroker(b, br.ID)
		return nil
	})
}
