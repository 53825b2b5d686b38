package sim

// nemesis injects one fault every 100-400ms of simulated time: crash a
// broker (it restarts 50-600ms later), shut one down (controlled shutdown,
// shutdown.go; it restarts 50-600ms after stopping), partition a broker from the other
// brokers (Jepsen 2013: it still reaches the controller) or from everyone,
// cut one link one way, raise the drop rate, or heal everything.
func (w *world) nemesis() {
	if w.nemesisOff {
		return
	}
	defer w.at(100+int64(w.intn(300)), w.nemesis)
	b := w.brokers[w.intn(len(w.brokers))]
	switch x := w.intn(100); {
	case x < 8:
		if b.alive && b.epoch != 0 && !b.wantDown {
			b.beginShutdown()
		}
	case x < 25:
		if !b.alive {
			return
		}
		b.crash()
		inc := b.incarnation
		w.at(50+int64(w.intn(550)), func() {
			if !b.alive && b.incarnation == inc && !w.nemesisOff {
				b.restart()
			}
		})
	case x < 40:
		w.net.isolate(b.id, false)
		w.stats.Partitions++
		w.tracef("PARTITION broker %d from the other brokers", b.id)
	case x < 50:
		w.net.isolate(b.id, true)
		w.stats.Partitions++
		w.tracef("PARTITION broker %d from everyone", b.id)
	case x < 65:
		to := w.brokers[w.intn(len(w.brokers))].id
		if w.chance(0.3) {
			to = controllerID
		}
		if to != b.id {
			w.net.cut[[2]int32{b.id, to}] = true
			w.stats.Partitions++
			w.tracef("CUT %d -> %d (one way)", b.id, to)
		}
	case x < 72:
		w.net.dropP = 0.1 + 0.2*w.rng.Float64()
		w.tracef("DROP rate %.2f", w.net.dropP)
	default:
		w.net.healAll()
		w.net.dropP = 0
		w.tracef("HEAL")
	}
}
