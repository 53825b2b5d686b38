package controller

import (
	"context"

	"github.com/sluice-io/sluice/internal/metadata"
)

// UnregisterBroker (API 64; KIP-631's broker lifecycle): the active
// controller removes a broker's registration with an Unregister record
// (Kafka's UnregisterBrokerRecord), after metadata.CheckUnregister:
// BROKER_ID_NOT_REGISTERED for an unknown id, INVALID_REQUEST for a broker
// that is active or still listed as a replica of any partition (Kafka's
// ReplicationControlManager.unregisterBroker would take such a broker out
// of the ISRs; sluice asks for the replicas to be moved first). The id is
// then free: a broker starting with it registers afresh.

// opUnregister is the RPC operation of this file.
const opUnregister = "UnregisterBroker"

func init() {
	handlers[opUnregister] = (*active).unregister
}

type unregisterReq struct {
	ID int32 `json:"id"`
}

// unregister is UnregisterBroker on the active controller: one record,
// checked against the image with every decision before it.
func (a *active) unregister(ctx context.Context, body []byte) (any, int64, error) {
	var in unregisterReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		if err := metadata.CheckUnregister(im, in.ID); err != nil {
			return err
		}
		a.n.log.Info("unregistering broker", "broker", in.ID, "epoch", im.Brokers[in.ID].Epoch)
		b.add(record{Type: recUnregister, ID: in.ID, Epoch: im.Brokers[in.ID].Epoch})
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	// Forget the broker's session state; a new registration starts it again.
	a.mu.Lock()
	delete(a.contact, in.ID)
	delete(a.applied, in.ID)
	delete(a.shutdownAt, in.ID)
	delete(a.suspect, in.ID)
	a.mu.Unlock()
	return struct{}{}, off, nil
}

// UnregisterBroker implements metadata.BrokerUnregisterer through the
// active controller.
func (n *Node) UnregisterBroker(ctx context.Context, id int32) error {
	return n.write(ctx, opUnregister, unregisterReq{ID: id}, nil)
}
