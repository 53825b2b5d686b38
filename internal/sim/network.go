package sim

// network delivers messages between nodes with a random delay (which also
// reorders them), random drops, and cuts: a cut from a to b drops a's
// messages to b only (one-way); a partition is a set of cuts both ways.
// Messages to a node that crashed (or restarted) since they were sent are
// lost, as a TCP connection would be.
type network struct {
	w     *world
	cut   map[[2]int32]bool
	dropP float64
}

func newNetwork(w *world) *network {
	return &network{w: w, cut: map[[2]int32]bool{}}
}

// incarnation returns a node's incarnation (brokers restart; other nodes
// never do).
func (n *network) incarnation(id int32) int {
	if id >= 1 && int(id) <= len(n.w.brokers) {
		return n.w.brokers[id-1].incarnation
	}
	return 0
}

func (n *network) alive(id int32) bool {
	if id >= 1 && int(id) <= len(n.w.brokers) {
		return n.w.brokers[id-1].alive
	}
	return true
}

// send schedules deliver on the receiver unless the message is lost.
func (n *network) send(from, to int32, deliver func()) {
	w := n.w
	if n.cut[[2]int32{from, to}] || !n.alive(from) {
		return
	}
	if n.dropP > 0 && w.chance(n.dropP) {
		return
	}
	delay := 1 + int64(w.intn(4))
	if w.chance(0.05) {
		delay += int64(w.intn(40)) // a slow path: reorders
	}
	fromInc, toInc := n.incarnation(from), n.incarnation(to)
	w.at(delay, func() {
		if !n.alive(to) || n.incarnation(to) != toInc || n.incarnation(from) != fromInc {
			return
		}
		deliver()
	})
}

func (n *network) healAll() { clear(n.cut) }

// isolate cuts node id off from every other broker, and from the controller
// too if fromController.
func (n *network) isolate(id int32, fromController bool) {
	for _, b := range n.w.brokers {
		if b.id != id {
			n.cut[[2]int32{id, b.id}] = true
			n.cut[[2]int32{b.id, id}] = true
		}
	}
	if fromController {
		n.cut[[2]int32{id, controllerID}] = true
		n.cut[[2]int32{controllerID, id}] = true
	}
}
