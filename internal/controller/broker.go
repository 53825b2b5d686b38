package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
)

// RPC operations (the controller's API, BrokerRegistration ... AllocateProducerIDs).
const (
	opRegister         = "BrokerRegistration"
	opHeartbeat        = "BrokerHeartbeat"
	opAlterPartition   = "AlterPartition"
	opAlterPartitions  = "AlterPartitions"
	opCreateTopic      = "CreateTopics"
	opDeleteTopic      = "DeleteTopics"
	opCreatePartitions = "CreatePartitions"
	opAlterConfigs     = "IncrementalAlterConfigs"
	opAllocatePIDs     = "AllocateProducerIDs"
	opAlterScram       = "AlterUserScramCredentials"
	opCreateAcls       = "CreateAcls"
	opDeleteAcls       = "DeleteAcls"
	opAlterQuotas      = "AlterClientQuotas"
	opAlterResConfigs  = "AlterResourceConfigs"
	opFetch            = "FetchMetadata"
)

var notController = kerr.NotController.Code

type registerReq struct {
	Broker metadata.Broker `json:"broker"` // ID, Host, Port, Rack, Incarnation, DirectoryID
	// PreviousEpoch is Kafka's previousBrokerEpoch: the broker epoch the
	// data directory last recorded (brokerEpochFile), -1 if none. A
	// registration that does not match the one it replaces is unclean
	// (elr.go).
	PreviousEpoch int64 `json:"previousEpoch,omitempty"`
}

type registerResp struct {
	Epoch int64 `json:"epoch"`
}

type heartbeatReq struct {
	ID           int32 `json:"id"`
	Epoch        int64 `json:"epoch"`
	Offset       int64 `json:"offset"` // metadata offset applied by the broker
	WantShutDown bool  `json:"wantShutDown,omitempty"`
	// Features are the levels the broker's binary supports; the active
	// controller records them if its registration has others.
	Features map[string]metadata.FeatureRange `json:"features,omitempty"`
}

type heartbeatResp struct {
	Fenced         bool `json:"fenced,omitempty"`
	ShuttingDown   bool `json:"shuttingDown,omitempty"`
	ShouldShutDown bool `json:"shouldShutDown,omitempty"`
}

type createTopicReq struct {
	Name         string            `json:"name"`
	Partitions   int32             `json:"partitions"`
	RF           int16             `json:"rf"`
	Assignment   [][]int32         `json:"assignment,omitempty"`
	Configs      map[string]string `json:"configs,omitempty"`
	ValidateOnly bool              `json:"validateOnly,omitempty"`
}

// createPartitionsReq is CreatePartitions. Assignment, when not null,
// gives each new partition's replicas; an empty list stays one (it is
// refused for naming too few partitions), so it has no omitempty.
type createPartitionsReq struct {
	Name         string    `json:"name"`
	Count        int32     `json:"count,omitempty"`
	Assignment   [][]int32 `json:"assignment"`
	ValidateOnly bool      `json:"validateOnly,omitempty"`
}

type topicReq struct {
	Name         string              `json:"name"`
	Count        int32               `json:"count,omitempty"`
	Ops          []metadata.ConfigOp `json:"ops,omitempty"`
	ValidateOnly bool                `json:"validateOnly,omitempty"`
}

type scramReq struct {
	Ops []metadata.ScramOp `json:"ops"`
}

// scramResp carries one error code and message per op (0: applied).
type scramResp struct {
	Codes    []int16  `json:"codes"`
	Messages []string `json:"messages"`
}

type createAclsReq struct {
	Bindings []acl.Binding `json:"bindings"`
}

type deleteAclsReq struct {
	Filters []acl.Filter `json:"filters"`
}

// aclResp carries one error code and message per binding or filter (0:
// done) and, for DeleteAcls, the bindings each filter removed.
type aclResp struct {
	Codes    []int16         `json:"codes"`
	Messages []string        `json:"messages"`
	Deleted  [][]acl.Binding `json:"deleted,omitempty"`
}

type alterQuotasReq struct {
	Entries []metadata.QuotaAlteration `json:"entries"`
}

// resConfigReq is AlterConfigs or IncrementalAlterConfigs on a BROKER
// or GROUP resource.
type resConfigReq struct {
	Resource     metadata.ConfigResource `json:"resource"`
	Ops          []metadata.ConfigOp     `json:"ops,omitempty"`
	Replace      bool                    `json:"replace,omitempty"`
	ValidateOnly bool                    `json:"validateOnly,omitempty"`
}

type pidResp struct {
	Start int64 `json:"start"`
	Count int64 `json:"count"`
}

type fetchReq struct {
	Offset    int64 `json:"offset"`
	MaxWaitMs int64 `json:"maxWaitMs"`
}

type fetchResp struct {
	Image *metadata.Image `json:"image,omitempty"`
}

// heartbeatInterval is broker.heartbeat.interval.ms, capped at a third of
// the session timeout so a live broker is never fenced.
func (n *Node) heartbeatInterval() time.Duration {
	hb := n.cfg.Broker.Int("broker.heartbeat.interval.ms", 2000)
	sess := n.cfg.Broker.Int("broker.session.timeout.ms", 9000)
	return time.Duration(max(min(hb, sess/3), 10)) * time.Millisecond
}

// brokerLoop registers this node as a broker and heartbeats until Close or
// until the controller grants a controlled shutdown.
func (n *Node) brokerLoop() {
	defer n.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-n.closing:
			return
		default:
		}
		wait := n.heartbeatInterval()
		if n.epoch.Load() < 0 {
			if err := n.register(); err != nil {
				n.log.Debug("broker registration", "err", err)
				wait = backoff
				backoff = min(2*backoff, time.Second)
			} else {
				backoff = 50 * time.Millisecond
				continue // heartbeat at once: the first one unfences
			}
		} else {
			done, err := n.heartbeat()
			if done {
				return
			}
			if err != nil {
				n.log.Debug("broker heartbeat", "err", err)
				wait = min(wait, 250*time.Millisecond)
			}
		}
		if n.wantDown.Load() {
			wait = min(wait, 100*time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-n.closing:
			t.Stop()
			return
		case <-n.poke:
		case <-t.C:
		}
		t.Stop()
	}
}

func (n *Node) register() error {
	ctx, cancel := context.WithTimeout(n.baseCtx, 10*time.Second)
	defer cancel()
	b := n.cfg.Self
	b.Incarnation = n.incarnate
	var resp registerResp
	off, err := n.cli.call(ctx, opRegister, registerReq{Broker: b, PreviousEpoch: n.prevEpoch}, &resp, 0)
	if err != nil {
		return err
	}
	if err := n.waitApplied(ctx, off); err != nil {
		return err
	}
	if resp.Epoch != n.prevEpoch {
		if err := writeBrokerEpoch(n.cfg.DataDir, resp.Epoch); err != nil {
			// Without the record the next start registers as unclean
			// (leaves every ELR): safe, so only logged.
			n.log.Warn("recording the broker epoch", "err", err)
		} else {
			n.prevEpoch = resp.Epoch
		}
	}
	n.epoch.Store(resp.Epoch)
	n.lastContact.Store(time.Now().UnixNano())
	n.log.Info("registered broker", "epoch", resp.Epoch)
	return nil
}

// heartbeat sends one heartbeat; done reports a granted controlled shutdown.
func (n *Node) heartbeat() (done bool, err error) {
	ctx, cancel := context.WithTimeout(n.baseCtx, max(n.heartbeatInterval()*2, time.Second))
	defer cancel()
	var resp heartbeatResp
	off, err := n.cli.call(ctx, opHeartbeat, heartbeatReq{ID: n.cfg.NodeID, Epoch: n.epoch.Load(), Offset: n.st.Image().Offset, WantShutDown: n.wantDown.Load(), Features: n.cfg.Self.Features}, &resp, 0)
	if errors.Is(err, kerr.StaleBrokerEpoch) || errors.Is(err, kerr.BrokerIDNotRegistered) {
		n.epoch.Store(-1) // replaced or unknown: register again
		return false, err
	}
	if err != nil {
		return false, err
	}
	n.lastContact.Store(time.Now().UnixNano())
	if resp.ShouldShutDown && n.wantDown.Load() {
		if err := n.waitApplied(ctx, off); err != nil {
			return false, err
		}
		n.grantMu.Do(func() { close(n.granted) })
		return true, nil
	}
	return false, nil
}

// ErrQuorumUnreachable is returned by ControlledShutdown when no active
// controller has answered this node for QuorumWait: nothing can grant the
// shutdown, so the caller stops without one rather than wait.
var ErrQuorumUnreachable = errors.New("no controller quorum reachable")

// QuorumWait is how long ControlledShutdown waits for any answer of an
// active controller (counted from the later of the last answer and the
// start of the shutdown) before giving up with ErrQuorumUnreachable: three
// raft timeouts, time for one controller election.
func (n *Node) QuorumWait() time.Duration { return 3 * n.cfg.RaftTimeout }

// LastContact returns when an active controller last answered this node's
// registration or heartbeat (the zero time if never).
func (n *Node) LastContact() time.Time {
	if ns := n.lastContact.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// ControlledShutdown implements metadata.Controller (docs/kafka-replication.md §4.3): the
// broker heartbeats with WantShutDown; the controller marks it shutting
// down, moves its leaderships and takes it out of every ISR, and grants the
// shutdown once it leads nothing. Heartbeats stop then (the session expires
// later and the broker is fenced, as in Kafka). It gives up with
// ErrQuorumUnreachable as soon as no active controller has answered for
// QuorumWait, so a node whose quorum is gone stops in seconds, and at once
// if it never registered.
func (n *Node) ControlledShutdown(ctx context.Context) error {
	start := time.Now()
	if n.LastContact().IsZero() {
		// Never registered: no controller knows this broker, so it leads
		// nothing and there is nothing to move.
		return fmt.Errorf("%w: this broker never registered with a controller", ErrQuorumUnreachable)
	}
	n.wantDown.Store(true)
	select {
	case n.poke <- struct{}{}:
	default:
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-n.granted:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-n.closing:
			return errors.New("controller: closed")
		case <-tick.C:
			since := start
			if lc := n.LastContact(); lc.After(since) {
				since = lc
			}
			if time.Since(since) > n.QuorumWait() {
				last := "never"
				if lc := n.LastContact(); !lc.IsZero() {
					last = time.Since(lc).Round(time.Millisecond).String() + " ago"
				}
				return fmt.Errorf("%w: no active controller answered for %v (last answer %s)", ErrQuorumUnreachable, n.QuorumWait(), last)
			}
		}
	}
}

// fetchLoop makes a broker-only node follow the committed image by long
// polls to the voters (the active controller first).
func (n *Node) fetchLoop() {
	defer n.wg.Done()
	n.fetchImages(func() bool { return true })
}

// fetchImages long-polls the active controller for newer images while
// want() holds, checking it again every second while it does not.
func (n *Node) fetchImages(want func() bool) {
	for {
		select {
		case <-n.closing:
			return
		default:
		}
		if !want() {
			if !sleepCtx(n.baseCtx, time.Second) {
				return
			}
			continue
		}
		cur := n.st.Image().Offset
		ctx, cancel := context.WithTimeout(n.baseCtx, 20*time.Second)
		var resp fetchResp
		_, err := n.cli.call(ctx, opFetch, fetchReq{Offset: cur, MaxWaitMs: 5000}, &resp, 5*time.Second)
		cancel()
		if err != nil {
			if !sleepCtx(n.baseCtx, 200*time.Millisecond) {
				return
			}
			continue
		}
		if im := resp.Image; im != nil && im.Offset > cur {
			if im.Brokers == nil {
				im.Brokers = map[int32]metadata.Broker{}
			}
			if im.Topics == nil {
				im.Topics = map[string]*metadata.Topic{}
			}
			n.st.publishNewer(im)
		}
	}
}
