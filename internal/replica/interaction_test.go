package replica

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/sluice-io/sluice/internal/epoch"
	"github.com/sluice-io/sluice/internal/producer"
)

// TestInteraction runs the scenario files in testdata/ (datadriven; rewrite
// the expected output with -rewrite). The environment is a hand-driven
// cluster: one partition, replicas on brokers, an inline controller, disks
// that can lose their unflushed suffix. Commands:
//
//	init replicas=(1,2,3) [min-isr=N] [lag=MS] [manual-flush]
//	elect leader=N [isr=(..)] [unclean] [notify=(..)]  controller elects
//	meta [to=(..)]               deliver the controller's state
//	produce [to=N] [acks=all|1|0] [n=K] [val=S] [pid=P seq=S pepoch=E] [timeout=MS]
//	fetch N [times=K]            follower N fetches from its leader
//	flush N                      N's disk syncs everything written
//	tick ms=M                    advance the clock
//	alter                        controller answers queued ISR proposals
//	crash N [keep=K]             N dies; keeps K unflushed batches
//	restart N                    N recovers from its disk
//	consume [from=O]             read from the leader up to its HW
//	status | log N | check
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		env := &ienv{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return env.handle(t, d)
		})
	})
}

type inode struct {
	id          int32
	r           *Replica
	alive       bool
	brokerEpoch int64
	disk        []Batch // written batches
	diskFlushed int     // number of batches synced
	diskHW      int64
	epochs      []epoch.Entry
}

func (n *inode) diskLEO() int64 {
	if len(n.disk) == 0 {
		return 0
	}
	return n.disk[len(n.disk)-1].LastOffset() + 1
}

type iacked struct {
	off int64
	val string
}

type ienv struct {
	nodes       []*inode
	minISR      int
	lag         int64
	manualFlush bool
	now         int64
	nextID      uint64
	// controller
	leader, leaderEpoch, partitionEpoch int32
	replicas, isr                       []int32
	proposals                           []AlterPartitionRequest
	acked                               []iacked
	pendingVals                         map[uint64]string
	out                                 *strings.Builder
}

func (e *ienv) node(id int32) *inode {
	for _, n := range e.nodes {
		if n.id == id {
			return n
		}
	}
	panic(fmt.Sprintf("no broker %d", id))
}

func (e *ienv) state() PartitionState {
	return PartitionState{Leader: e.leader, LeaderEpoch: e.leaderEpoch, PartitionEpoch: e.partitionEpoch,
		Replicas: slices.Clone(e.replicas), ISR: slices.Clone(e.isr)}
}

func (e *ienv) newReplica(n *inode) {
	c := epoch.New(n.epochs)
	ps := producer.NewState()
	for _, b := range n.disk {
		if b.ProducerID >= 0 {
			ps.Update(b.ProducerID, b.ProducerEpoch, producer.Batch{FirstSeq: b.BaseSeq, LastSeq: b.LastSeq(), FirstOffset: b.BaseOffset, LastOffset: b.LastOffset()})
		}
	}
	leo := n.diskLEO()
	c.TruncateFromEnd(leo) // as Kafka's log recovery does
	n.r = New(Config{ID: n.id, BrokerEpoch: n.brokerEpoch, Partition: "p0", MinISR: e.minISR, LagTimeMaxMs: e.lag},
		LogState{LEO: leo, HW: n.diskHW, Epochs: c, Producers: ps})
	n.r.Tick(e.now)
}

func ints(t *testing.T, d *datadriven.TestData, key string) []int32 {
	var out []int32
	for _, a := range d.CmdArgs {
		if a.Key != key {
			continue
		}
		for _, v := range a.Vals {
			x, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			out = append(out, int32(x))
		}
	}
	return out
}

func (e *ienv) handle(t *testing.T, d *datadriven.TestData) string {
	e.out = &strings.Builder{}
	arg := func(key string, def int) int {
		if d.HasArg(key) {
			var v int
			d.ScanArgs(t, key, &v)
			return v
		}
		return def
	}
	first := func() int32 {
		if len(d.CmdArgs) == 0 {
			t.Fatal("broker id expected")
		}
		id, err := strconv.Atoi(d.CmdArgs[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		return int32(id)
	}
	switch d.Cmd {
	case "init":
		e.replicas = ints(t, d, "replicas")
		e.minISR = arg("min-isr", 1)
		e.lag = int64(arg("lag", 1000))
		e.manualFlush = d.HasArg("manual-flush")
		e.now = 1000
		e.pendingVals = map[uint64]string{}
		e.leader, e.leaderEpoch = -1, 0
		e.isr = slices.Clone(e.replicas)
		for _, id := range e.replicas {
			n := &inode{id: id, alive: true, brokerEpoch: 1}
			e.nodes = append(e.nodes, n)
			e.newReplica(n)
		}
		return "ok"
	case "elect":
		leader := int32(arg("leader", -1))
		if isr := ints(t, d, "isr"); isr != nil {
			e.isr = isr
		}
		if d.HasArg("unclean") {
			e.isr = []int32{leader}
		} else if leader >= 0 && !slices.Contains(e.isr, leader) {
			return fmt.Sprintf("refused: %d is not in the ISR %v (unclean election disabled)", leader, e.isr)
		}
		e.leader = leader
		e.leaderEpoch++
		e.partitionEpoch++
		e.proposals = nil
		fmt.Fprintf(e.out, "controller: leader=%d epoch=%d isr=%v\n", e.leader, e.leaderEpoch, e.isr)
		to := ints(t, d, "notify")
		if to == nil {
			to = e.replicas
		}
		e.deliverMeta(to)
	case "meta":
		to := ints(t, d, "to")
		if to == nil {
			to = e.replicas
		}
		e.deliverMeta(to)
	case "produce":
		to := int32(arg("to", int(e.leader)))
		n := e.node(to)
		acks := AcksLeader
		if d.HasArg("acks") {
			var s string
			d.ScanArgs(t, "acks", &s)
			switch s {
			case "all":
				acks = AcksAll
			case "0":
				acks = AcksNone
			}
		}
		val := "v"
		if d.HasArg("val") {
			d.ScanArgs(t, "val", &val)
		}
		e.nextID++
		req := ProduceRequest{ID: e.nextID, Acks: acks, Batch: Batch{NumRecords: int32(arg("n", 1)), ProducerID: int64(arg("pid", -1)),
			ProducerEpoch: int16(arg("pepoch", 0)), BaseSeq: int32(arg("seq", 0)), Data: []byte(val)}}
		if d.HasArg("timeout") {
			req.DeadlineMs = e.now + int64(arg("timeout", 0))
		}
		e.pendingVals[req.ID] = val
		n.r.Append(req)
		e.process(n)
		e.autoFlush(n)
	case "fetch":
		n := e.node(first())
		for i := 0; i < arg("times", 1); i++ {
			e.fetch(n)
		}
	case "flush":
		e.flush(e.node(first()))
	case "tick":
		e.now += int64(arg("ms", 0))
		for _, n := range e.nodes {
			if n.alive {
				n.r.Tick(e.now)
				e.process(n)
			}
		}
	case "alter":
		e.alter()
	case "crash":
		n := e.node(first())
		keep := arg("keep", 0)
		n.alive = false
		cut := min(n.diskFlushed+keep, len(n.disk))
		lost := len(n.disk) - cut
		n.disk = n.disk[:cut]
		n.diskFlushed = cut
		fmt.Fprintf(e.out, "%d crashed, lost %d unflushed batches, log ends at %d\n", n.id, lost, n.diskLEO())
	case "restart":
		n := e.node(first())
		n.alive = true
		n.brokerEpoch++
		e.newReplica(n)
		fmt.Fprintf(e.out, "%d restarted: %s\n", n.id, n.r)
	case "consume":
		e.consume(int64(arg("from", 0)))
	case "status":
		for _, n := range e.nodes {
			if !n.alive {
				fmt.Fprintf(e.out, "%d: down\n", n.id)
				continue
			}
			fmt.Fprintf(e.out, "%d: %s\n", n.id, n.r)
		}
	case "log":
		n := e.node(first())
		fmt.Fprintf(e.out, "%d: %s\n", n.id, e.logString(n))
	case "check":
		e.check()
	default:
		t.Fatalf("unknown command %q", d.Cmd)
	}
	return e.out.String()
}

func (e *ienv) deliverMeta(to []int32) {
	for _, id := range to {
		n := e.node(id)
		if !n.alive {
			continue
		}
		n.r.ApplyMetadata(e.state())
		e.process(n)
	}
}

func (e *ienv) logString(n *inode) string {
	var parts []string
	for i, b := range n.disk {
		s := fmt.Sprintf("%d:e%d:%s", b.BaseOffset, b.Epoch, b.Data)
		if b.NumRecords > 1 {
			s = fmt.Sprintf("%d-%d:e%d:%s", b.BaseOffset, b.LastOffset(), b.Epoch, b.Data)
		}
		if i >= n.diskFlushed {
			s += "*"
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "] (* = unflushed)"
}

// process executes n's Ready against its disk and prints it.
func (e *ienv) process(n *inode) {
	if !n.r.HasReady() {
		return
	}
	rd := n.r.Ready()
	var parts []string
	if tr := rd.Truncate; tr != nil {
		k := len(n.disk)
		for k > 0 && n.disk[k-1].BaseOffset >= tr.Offset {
			k--
		}
		if tr.Fully {
			k = 0
		}
		n.disk = n.disk[:k]
		n.diskFlushed = min(n.diskFlushed, k)
		parts = append(parts, fmt.Sprintf("truncate to %d", tr.Offset))
	}
	for _, b := range rd.Append {
		n.disk = append(n.disk, b)
		parts = append(parts, fmt.Sprintf("append %d..%d e%d", b.BaseOffset, b.LastOffset(), b.Epoch))
	}
	if rd.Epochs != nil {
		n.epochs = rd.Epochs
		parts = append(parts, fmt.Sprintf("epochs %s", epoch.New(rd.Epochs)))
	}
	if rd.HWChanged {
		parts = append(parts, fmt.Sprintf("hw=%d", rd.HW))
	}
	for _, c := range rd.Completed {
		s := fmt.Sprintf("produce#%d", c.ID)
		if c.Error != ErrNone {
			s += " " + codeName(c.Error)
		} else {
			s += fmt.Sprintf(" ok [%d..%d]", c.BaseOffset, c.LastOffset)
			if c.Duplicate {
				s += " duplicate"
			}
			if c.Acks == AcksAll {
				e.acked = append(e.acked, iacked{c.BaseOffset, e.pendingVals[c.ID]})
			}
		}
		parts = append(parts, s)
	}
	if p := rd.ISRProposal; p != nil {
		parts = append(parts, fmt.Sprintf("propose isr=%v (le=%d pe=%d)", p.NewISR, p.LeaderEpoch, p.PartitionEpoch))
		e.proposals = append(e.proposals, *p)
	}
	n.r.Advance()
	fmt.Fprintf(e.out, "%d: %s\n", n.id, strings.Join(parts, ", "))
}

func (e *ienv) autoFlush(n *inode) {
	if !e.manualFlush {
		e.flush(n)
	}
}

func (e *ienv) flush(n *inode) {
	if !n.alive || n.diskFlushed == len(n.disk) {
		return
	}
	n.diskFlushed = len(n.disk)
	n.diskHW = n.r.HW()
	n.r.Flushed(n.diskLEO(), n.r.LogGen())
	fmt.Fprintf(e.out, "%d: flushed to %d\n", n.id, n.diskLEO())
	e.process(n)
}

func (e *ienv) fetch(n *inode) {
	req, ok := n.r.FetchRequest()
	if !ok {
		fmt.Fprintf(e.out, "%d: no fetch to send (%s)\n", n.id, n.r)
		return
	}
	l := e.node(req.Leader)
	if !l.alive {
		fmt.Fprintf(e.out, "%d: leader %d is down\n", n.id, req.Leader)
		return
	}
	res := l.r.HandleFetch(req)
	resp := FetchResponse{Request: req, FetchResult: res}
	for _, b := range l.disk {
		if b.BaseOffset >= res.From && b.BaseOffset < res.To && res.Error == ErrNone && res.Diverging == nil {
			resp.Batches = append(resp.Batches, b)
		}
	}
	desc := fmt.Sprintf("%d->%d fetch offset=%d lastEpoch=%d: ", n.id, l.id, req.FetchOffset, req.LastFetchedEpoch)
	if req.Unflushed > 0 {
		desc = fmt.Sprintf("%d->%d fetch offset=%d unflushed=%d lastEpoch=%d: ", n.id, l.id, req.FetchOffset, req.Unflushed, req.LastFetchedEpoch)
	}
	switch {
	case res.Error != ErrNone:
		desc += codeName(res.Error)
	case res.Diverging != nil:
		desc += fmt.Sprintf("diverging epoch=%d end=%d", res.Diverging.Epoch, res.Diverging.EndOffset)
	default:
		desc += fmt.Sprintf("%d batches, leader hw=%d", len(resp.Batches), res.HW)
	}
	fmt.Fprintln(e.out, desc)
	e.process(l)
	n.r.HandleFetchResponse(resp)
	e.process(n)
	e.autoFlush(n)
}

func (e *ienv) alter() {
	ps := e.proposals
	e.proposals = nil
	for _, p := range ps {
		res := AlterPartitionResult{Seq: p.Seq, LeaderEpoch: e.leaderEpoch, PartitionEpoch: e.partitionEpoch, ISR: slices.Clone(e.isr)}
		switch {
		case p.LeaderEpoch < e.leaderEpoch:
			res.Error = ErrFencedLeaderEpoch
		case p.Leader != e.leader:
			res.Error = ErrInvalidRequest
		case p.PartitionEpoch < e.partitionEpoch:
			res.Error = ErrInvalidUpdateVersion
		default:
			e.isr = slices.Clone(p.NewISR)
			e.partitionEpoch++
			res.PartitionEpoch = e.partitionEpoch
			res.ISR = slices.Clone(e.isr)
		}
		fmt.Fprintf(e.out, "controller: isr=%v from %d: %s (isr=%v pe=%d)\n", p.NewISR, p.Leader, codeName(res.Error), e.isr, e.partitionEpoch)
		n := e.node(p.Leader)
		if n.alive {
			n.r.ISRChangeResult(res)
			e.process(n)
		}
	}
}

func (e *ienv) consume(from int64) {
	l := e.node(e.leader)
	res := l.r.HandleFetch(FetchRequest{ReplicaID: -1, CurrentLeaderEpoch: -1, FetchOffset: from, LastFetchedEpoch: -1})
	if res.Error != ErrNone {
		fmt.Fprintf(e.out, "consume: %s\n", codeName(res.Error))
		return
	}
	var got []string
	for _, b := range l.disk {
		if b.BaseOffset >= res.From && b.BaseOffset < res.To {
			got = append(got, fmt.Sprintf("%d:%s", b.BaseOffset, b.Data))
		}
	}
	fmt.Fprintf(e.out, "consume from %d (hw=%d): %v\n", from, res.HW, got)
}

func (e *ienv) check() {
	if e.leader < 0 {
		fmt.Fprintln(e.out, "no leader")
		return
	}
	l := e.node(e.leader)
	lost := 0
	for _, a := range e.acked {
		found := false
		for _, b := range l.disk {
			if b.BaseOffset == a.off && string(b.Data) == a.val {
				found = true
			}
		}
		if !found {
			lost++
			fmt.Fprintf(e.out, "LOST acked %s at offset %d\n", a.val, a.off)
		}
	}
	sort.Slice(e.acked, func(i, j int) bool { return e.acked[i].off < e.acked[j].off })
	fmt.Fprintf(e.out, "acks=all acknowledged: %d, lost on leader %d: %d\n", len(e.acked), e.leader, lost)
}

func codeName(c int16) string {
	switch c {
	case ErrNone:
		return "NONE"
	case ErrOffsetOutOfRange:
		return "OFFSET_OUT_OF_RANGE"
	case ErrNotLeaderOrFollower:
		return "NOT_LEADER_OR_FOLLOWER"
	case ErrRequestTimedOut:
		return "REQUEST_TIMED_OUT"
	case ErrNotEnoughReplicas:
		return "NOT_ENOUGH_REPLICAS"
	case ErrNotEnoughReplicasAfterAppend:
		return "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
	case ErrInvalidRequest:
		return "INVALID_REQUEST"
	case ErrOutOfOrderSequence:
		return "OUT_OF_ORDER_SEQUENCE_NUMBER"
	case ErrInvalidProducerEpoch:
		return "INVALID_PRODUCER_EPOCH"
	case ErrFencedLeaderEpoch:
		return "FENCED_LEADER_EPOCH"
	case ErrUnknownLeaderEpoch:
		return "UNKNOWN_LEADER_EPOCH"
	case ErrInvalidUpdateVersion:
		return "INVALID_UPDATE_VERSION"
	}
	return fmt.Sprintf("error %d", c)
}
