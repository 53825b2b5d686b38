package chaos

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Source ids of proxied connections: a node id (>= 1), the harness's own
// clients, or unknown.
const (
	srcClient  = 0
	srcUnknown = -1
)

// network holds the partition rules and the per-destination TCP proxies.
//
// Every proxy forwards 127.0.0.1:<proxy port> to one node's real port. When
// it accepts a connection it finds which process opened it: the peer's
// ephemeral port is looked up in /proc/net/tcp to get the socket inode, and
// the inode in /proc/<pid>/fd of each running node (and of the harness). So
// a single proxy per destination still knows the (source, destination) of
// every connection, and a rule can drop what node A sends to node B.
//
// Rules are per direction, like dropped packets: drop(A, B) loses every
// byte A sends to B, on connections A opened to B (its requests) and on
// connections B opened to A (A's responses). A blocked direction of a live
// connection stops forwarding (the bytes are held, never delivered; the
// sender sees no error), while the other direction keeps flowing: with
// drop(A, B) alone, A still receives and acts on B's requests and B never
// hears back, and B never receives A's requests. A new connection on a
// link with either direction blocked is accepted and held silent, as a TCP
// handshake would fail with either SYN or SYN-ACK lost. When a rule is
// removed every connection it had blocked is closed, as if it had timed out
// during the partition, and peers reconnect.
type network struct {
	mu      sync.Mutex
	drops   map[[2]int]bool // (from, to): what from sends to to is lost
	proxies []*proxy
	pids    func() map[int]int // pid -> node id of running nodes
	delay   *delayRule         // FaultDelayTxn, see delay.go
	selfPid int
	logf    func(string, ...any)
}

func newNetwork(pids func() map[int]int, logf func(string, ...any)) *network {
	return &network{drops: map[[2]int]bool{}, pids: pids, selfPid: os.Getpid(), logf: logf}
}

// blockedLocked reports whether bytes sent by from to to are lost.
func (nw *network) blockedLocked(from, to int) bool {
	return nw.drops[[2]int{from, to}]
}

// isolation is the drops that cut node id from every other node, the
// harness clients and unidentified sources, both ways.
func (nw *network) isolation(id int) [][2]int {
	var pairs [][2]int
	for _, other := range append(nw.nodeIDs(), srcClient, srcUnknown) {
		if other != id {
			pairs = append(pairs, [2]int{id, other}, [2]int{other, id})
		}
	}
	return pairs
}

// nodeIDs are the nodes the proxies lead to.
func (nw *network) nodeIDs() []int {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var ids []int
	for _, p := range nw.proxies {
		if !slices.Contains(ids, p.dst) {
			ids = append(ids, p.dst)
		}
	}
	return ids
}

// drop loses, from now on, everything from sends to to (one way).
func (nw *network) drop(from, to int) { nw.dropMany([][2]int{{from, to}}) }

// dropMany installs several one-way drops at once.
func (nw *network) dropMany(pairs [][2]int) {
	nw.mu.Lock()
	for _, p := range pairs {
		nw.drops[p] = true
	}
	nw.mu.Unlock()
	nw.apply()
}

// healAll removes every rule (drops and the delay rule).
func (nw *network) healAll() {
	nw.mu.Lock()
	nw.drops = map[[2]int]bool{}
	nw.delay = nil // requests already held are still delivered
	nw.mu.Unlock()
	nw.apply()
}

// directions reports which directions of a connection from src to dst are
// blocked: up is src -> dst (requests), down is dst -> src (responses).
func (nw *network) directions(src, dst int) (up, down bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.blockedLocked(src, dst), nw.blockedLocked(dst, src)
}

// apply freezes the directions of live connections that are now blocked and
// closes connections with a blocked direction that healed.
func (nw *network) apply() {
	nw.mu.Lock()
	proxies := append([]*proxy(nil), nw.proxies...)
	nw.mu.Unlock()
	for _, p := range proxies {
		p.mu.Lock()
		conns := make([]*pconn, 0, len(p.conns))
		for c := range p.conns {
			conns = append(conns, c)
		}
		p.mu.Unlock()
		for _, c := range conns {
			up, down := nw.directions(c.src, p.dst)
			if (c.frozenUp.Load() && !up) || (c.frozenDown.Load() && !down) {
				c.close()
				continue
			}
			if (up && !c.frozenUp.Load()) || (down && !c.frozenDown.Load()) {
				p.frozenTotal.Add(1)
			}
			if up {
				c.frozenUp.Store(true)
			}
			if down {
				c.frozenDown.Store(true)
			}
		}
	}
}

// proxy forwards one listening port to one node's real port.
type proxy struct {
	nw      *network
	kind    string // "kafka" or "ctrl"
	dst     int
	ln      net.Listener
	backend string

	mu    sync.Mutex
	conns map[*pconn]struct{}

	accepted, frozenTotal, unknownSrc atomic.Int64
	wg                                sync.WaitGroup
}

type pconn struct {
	src    int
	client net.Conn
	// frozenUp / frozenDown: the client -> backend / backend -> client
	// direction no longer forwards.
	frozenUp, frozenDown atomic.Bool
	closed               chan struct{}
	// held counts reads a frozen direction took and never forwarded
	// (hold); tests wait on it to know bytes were lost, not late.
	held atomic.Int64

	mu      sync.Mutex
	backend net.Conn
	done    bool
}

func (c *pconn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.done = true
	close(c.closed)
	c.client.Close()
	if c.backend != nil {
		c.backend.Close()
	}
}

// maxHeld bounds the connections a proxy keeps open (held or live).
const maxHeld = 2048

// newProxy listens on listen ("127.0.0.1:0" for any port) and forwards
// to backend.
func (nw *network) newProxy(kind string, dst int, listen, backend string) (*proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &proxy{nw: nw, kind: kind, dst: dst, ln: ln, backend: backend, conns: map[*pconn]struct{}{}}
	nw.mu.Lock()
	nw.proxies = append(nw.proxies, p)
	nw.mu.Unlock()
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			return
		}
		p.accepted.Add(1)
		p.mu.Lock()
		full := len(p.conns) >= maxHeld
		p.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	defer p.wg.Done()
	src := p.nw.identify(c.RemoteAddr(), p.port())
	if src == srcUnknown {
		p.unknownSrc.Add(1)
	}
	pc := &pconn{src: src, client: c, closed: make(chan struct{})}
	p.mu.Lock()
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	defer func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	if up, down := p.nw.directions(src, p.dst); up || down {
		// Held silent until the link heals (apply closes it) or the
		// peer gives up.
		pc.frozenUp.Store(true)
		pc.frozenDown.Store(true)
		p.frozenTotal.Add(1)
		go func() { io.Copy(io.Discard, c); pc.close() }()
		<-pc.closed
		return
	}
	b, err := net.DialTimeout("tcp", p.backend, 3*time.Second)
	if err != nil {
		return
	}
	pc.mu.Lock()
	if pc.done { // closed while dialing
		pc.mu.Unlock()
		b.Close()
		return
	}
	pc.backend = b
	pc.mu.Unlock()
	if tc, ok := b.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	done := make(chan struct{}, 2)
	go func() {
		if p.kind == "kafka" && src == srcClient {
			pc.pipeKafka(b, c, &pc.frozenUp, p) // whole requests, for the delay rule
		} else {
			pc.pipe(b, c, &pc.frozenUp)
		}
		done <- struct{}{}
	}()
	go func() { pc.pipe(c, b, &pc.frozenDown); done <- struct{}{} }()
	<-done
	pc.close()
	<-done
}

// pipe copies src to dst until an error, or stops forwarding once frozen
// is set (and waits for the connection to be closed).
func (c *pconn) pipe(dst, src net.Conn, frozen *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if frozen.Load() {
				c.hold()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold drops what a frozen direction just read: it counts it and waits
// for the connection to be closed.
func (c *pconn) hold() {
	c.held.Add(1)
	<-c.closed
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// identify returns the node id (or srcClient) owning the socket connected
// from remote to the proxy's port, using /proc.
func (nw *network) identify(remote net.Addr, proxyPort int) int {
	ta, ok := remote.(*net.TCPAddr)
	if !ok {
		return srcUnknown
	}
	inode := socketInode(ta.Port, proxyPort)
	if inode == "" {
		return srcUnknown
	}
	target := "socket:[" + inode + "]"
	owners := nw.pids()
	owners[nw.selfPid] = srcClient
	for pid, id := range owners {
		if pidHasSocket(pid, target) {
			return id
		}
	}
	return srcUnknown
}

// socketInode finds the inode of the IPv4 socket whose local port is lport
// and remote port rport in /proc/net/tcp.
func socketInode(lport, rport int) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	wantL := fmt.Sprintf(":%04X", lport)
	wantR := fmt.Sprintf(":%04X", rport)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 10 || !strings.HasSuffix(fs[1], wantL) || !strings.HasSuffix(fs[2], wantR) {
			continue
		}
		if fs[9] != "0" {
			return fs[9]
		}
	}
	return ""
}

func pidHasSocket(pid int, target string) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == target {
			return true
		}
	}
	return false
}
