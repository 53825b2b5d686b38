package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
)

// handler serves one controller RPC on the active controller. It returns
// the reply body and the offset of the entry it wrote (0 for none).
type handler func(a *active, ctx context.Context, body []byte) (any, int64, error)

var handlers = map[string]handler{
	opRegister:         (*active).register,
	opHeartbeat:        (*active).heartbeat,
	opAlterPartition:   (*active).alterPartition,
	opAlterPartitions:  (*active).alterPartitions,
	opCreateTopic:      (*active).createTopic,
	opDeleteTopic:      (*active).deleteTopic,
	opCreatePartitions: (*active).createPartitions,
	opAlterConfigs:     (*active).alterConfigs,
	opAllocatePIDs:     (*active).allocatePIDs,
	opAlterScram:       (*active).alterScram,
	opCreateAcls:       (*active).createAcls,
	opDeleteAcls:       (*active).deleteAcls,
	opAlterQuotas:      (*active).alterQuotas,
	opAlterResConfigs:  (*active).alterResourceConfigs,
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", kerr.InvalidRequest, err)
	}
	return nil
}

// register is BrokerRegistration: a new incarnation replaces the old one
// and starts fenced (its ISR memberships and leaderships are removed in the
// same entry); the broker epoch is the entry's offset. A retry by the same
// incarnation gets its current epoch without a write.
func (a *active) register(ctx context.Context, body []byte) (any, int64, error) {
	var in registerReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	id := in.Broker.ID
	if id < 0 {
		return nil, 0, kerr.InvalidRequest
	}
	a.mu.Lock()
	delete(a.shutdownAt, id)
	a.mu.Unlock()
	var epoch int64
	off, err := a.decideSplit(ctx, func(im *metadata.Image, b *batch) error {
		if cur, ok := im.Brokers[id]; ok && in.Broker.Incarnation != "" && cur.Incarnation == in.Broker.Incarnation {
			epoch = cur.Epoch
			return nil
		}
		unclean := uncleanRegistration(im, in)
		br := in.Broker
		b.addLast(record{Type: recRegisterBroker, Broker: &br})
		a.removeBroker(b, id)
		if unclean && !a.knobs.KeepELRAfterUncleanRegistration {
			a.removeFromELR(b, id)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if off > 0 {
		epoch = off
	}
	a.touch(id)
	return registerResp{Epoch: epoch}, off, nil
}

func leadsAny(im *metadata.Image, id int32) bool {
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			if p.Leader == id {
				return true
			}
		}
	}
	return false
}

// heartbeat is BrokerHeartbeat: it refreshes the session, unfences a
// caught-up broker, and runs controlled shutdown (docs/kafka-replication.md §4.3).
func (a *active) heartbeat(ctx context.Context, body []byte) (any, int64, error) {
	var in heartbeatReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	im := a.n.st.Image()
	br, ok := im.Brokers[in.ID]
	if !ok {
		return nil, 0, kerr.BrokerIDNotRegistered
	}
	if br.Epoch != in.Epoch {
		return nil, 0, kerr.StaleBrokerEpoch
	}
	a.touch(in.ID)
	a.noteApplied(in.ID, in.Offset)
	unfence := br.Fenced && !br.ShuttingDown && !in.WantShutDown && in.Offset >= br.Epoch
	shutdown := in.WantShutDown && !br.Fenced && !br.ShuttingDown
	// A registration written by a controller whose binary knew no
	// features lacks the broker's; its heartbeats carry them.
	features := in.Features != nil && !maps.Equal(br.Features, in.Features)
	var off int64
	if unfence || shutdown || features {
		var err error
		off, err = a.decideSplit(ctx, func(im *metadata.Image, b *batch) error {
			br, ok := im.Brokers[in.ID]
			if !ok || br.Epoch != in.Epoch {
				return kerr.StaleBrokerEpoch
			}
			if features && !maps.Equal(br.Features, in.Features) {
				b.add(record{Type: recBrokerFeatures, ID: in.ID, Epoch: br.Epoch, Features: in.Features})
			}
			if unfence && br.Fenced && !br.ShuttingDown {
				a.n.log.Info("unfencing broker", "broker", in.ID, "epoch", br.Epoch)
				b.add(record{Type: recUnfence, ID: in.ID, Epoch: br.Epoch})
				a.electOffline(b, "")
			}
			if shutdown && !br.Fenced && !br.ShuttingDown {
				a.n.log.Info("controlled shutdown", "broker", in.ID, "epoch", br.Epoch)
				b.addLast(record{Type: recShutdown, ID: in.ID, Epoch: br.Epoch})
				a.removeBroker(b, in.ID)
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		if shutdown {
			a.mu.Lock()
			a.shutdownAt[in.ID] = off
			a.mu.Unlock()
		}
	}
	im = a.n.st.Image()
	br = im.Brokers[in.ID]
	resp := heartbeatResp{Fenced: br.Fenced, ShuttingDown: br.ShuttingDown}
	if in.WantShutDown {
		resp.ShouldShutDown = br.Fenced || (br.ShuttingDown && !leadsAny(im, in.ID) && (a.knobs.GrantShutdownEarly || a.othersCaughtUp(im, in.ID)))
		if resp.ShouldShutDown {
			off = im.Offset // the broker catches up to this before it stops
		}
	}
	return resp, off, nil
}

// validateAlter is the validation of docs/kafka-replication.md §2.4, in
// order. It returns an error code.
func validateAlter(im *metadata.Image, req *metadata.AlterPartitionRequest) int16 {
	br, ok := im.Brokers[req.BrokerID]
	if !ok || br.Epoch != req.BrokerEpoch {
		return kerr.StaleBrokerEpoch.Code
	}
	t, ok := im.Topics[req.Topic]
	if !ok || req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition.Code
	}
	p := &t.Partitions[req.Partition]
	switch {
	case req.LeaderEpoch > p.LeaderEpoch || req.PartitionEpoch > p.PartitionEpoch:
		return kerr.NotController.Code
	case req.LeaderEpoch < p.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case req.BrokerID != p.Leader:
		return kerr.InvalidRequest.Code
	case req.PartitionEpoch < p.PartitionEpoch:
		return kerr.InvalidUpdateVersion.Code
	}
	if !has(req.NewISR, p.Leader) {
		return kerr.InvalidRequest.Code
	}
	for i, r := range req.NewISR {
		if !p.HasReplica(r) || has(req.NewISR[:i], r) {
			return kerr.InvalidRequest.Code
		}
	}
	if p.Recovering && !req.Recovered && len(req.NewISR) > 1 {
		return kerr.InvalidRequest.Code
	}
	for i, r := range req.NewISR {
		b, ok := im.Brokers[r]
		if !ok || !b.Active() {
			return kerr.IneligibleReplica.Code
		}
		if i < len(req.ISRBrokerEpochs) && req.ISRBrokerEpochs[i] > 0 && req.ISRBrokerEpochs[i] != b.Epoch {
			return kerr.IneligibleReplica.Code
		}
	}
	return 0
}

func stateOf(p *metadata.Partition) metadata.AlterPartitionResponse {
	return metadata.AlterPartitionResponse{Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: append([]int32(nil), p.ISR...)}
}

// alterPartition is AlterPartition: a compare-and-set of the ISR on
// (leaderEpoch, partitionEpoch). The reply is sent after commit.
func (a *active) alterPartition(ctx context.Context, body []byte) (any, int64, error) {
	var req metadata.AlterPartitionRequest
	if err := decode(body, &req); err != nil {
		return nil, 0, err
	}
	var resp metadata.AlterPartitionResponse
	off, err := a.decide(ctx, func(im *metadata.Image, b *batch) error {
		resp = alterOne(b, &req)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return resp, off, nil
}

// alterOne validates one ISR change against the batch's image and adds
// its PartitionChange.
func alterOne(b *batch, req *metadata.AlterPartitionRequest) metadata.AlterPartitionResponse {
	im := b.tx.im
	var resp metadata.AlterPartitionResponse
	code := validateAlter(im, req)
	if t, ok := im.Topics[req.Topic]; ok && req.Partition >= 0 && int(req.Partition) < len(t.Partitions) {
		resp = stateOf(&t.Partitions[req.Partition])
	}
	resp.Error = code
	if code != 0 {
		return resp
	}
	t := im.Topics[req.Topic]
	p := &t.Partitions[req.Partition]
	recovering := p.Recovering && !req.Recovered
	n := len(b.recs)
	b.change(t, p, p.Leader, append([]int32(nil), req.NewISR...), recovering)
	if len(b.recs) > n {
		resp = stateOf(&b.tx.im.Topics[req.Topic].Partitions[req.Partition])
		if b.recs[len(b.recs)-1].Part.Assign != nil {
			// The ISR change completed a reassignment (reassign.go). Kafka
			// answers NEW_LEADER_ELECTED when that moves the leadership;
			// here also when only the replica set changes, because the
			// leader takes a replica set from metadata only: it keeps the
			// proposal pending until the new state arrives.
			resp.Error = kerr.NewLeaderElected.Code
		}
	}
	return resp
}

// createTopic is CreateTopics, validated like metadata.Local.
func (a *active) createTopic(ctx context.Context, body []byte) (any, int64, error) {
	var in createTopicReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	if err := metadata.ValidateTopicName(in.Name); err != nil {
		return nil, 0, err
	}
	cfg := a.n.cfg.Broker
	if in.Assignment == nil {
		if in.Partitions == -1 {
			in.Partitions = int32(cfg.Int("num.partitions", 1))
		}
		if in.RF == -1 {
			in.RF = int16(cfg.Int("default.replication.factor", 1))
		}
	} else {
		in.Partitions, in.RF = int32(len(in.Assignment)), 1
	}
	if in.Partitions > metadata.MaxPartitionsPerRequest {
		// Refused before placement (KAFKA-17870): no record is built.
		return nil, 0, metadata.ErrTooManyPartitionsPerRequest(int64(in.Partitions))
	}
	if in.Partitions <= 0 {
		return nil, 0, kerr.InvalidPartitions
	}
	if in.RF <= 0 {
		return nil, 0, kerr.InvalidReplicationFactor
	}
	if err := metadata.ValidateConfigs(in.Configs); err != nil {
		return nil, 0, err
	}
	lim := a.n.limits()
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		if _, ok := im.Topics[in.Name]; ok {
			return kerr.TopicAlreadyExists
		}
		if err := lim.CheckTotal(metadata.NumPartitions(im), int(in.Partitions)); err != nil {
			return err
		}
		counts := metadata.ReplicaCounts(im)
		var parts []metadata.Partition
		var err error
		if in.Assignment != nil {
			parts, err = manualPlacement(im, in.Assignment)
			if err == nil {
				err = lim.CheckBrokers(counts, parts)
			}
		} else {
			parts, err = a.placement(im, 0, in.Partitions, int(in.RF), counts, lim.MaxBrokerPartitions)
		}
		if err != nil || in.ValidateOnly {
			return err
		}
		t := &metadata.Topic{Name: in.Name, ID: a.newUUID(), Configs: map[string]string{}}
		for k, v := range in.Configs {
			t.Configs[k] = v
		}
		head := parts[:min(len(parts), maxPartitionsPerRecord)]
		t.Partitions = head
		b.add(record{Type: recCreateTopic, Topic: t})
		addPartitions(b, in.Name, parts[len(head):])
		return nil
	})
	return struct{}{}, off, err
}

// addPartitions adds CreatePartitions records of at most
// maxPartitionsPerRecord partitions each (one decision: they are written
// in the same entry).
func addPartitions(b *batch, topic string, parts []metadata.Partition) {
	for len(parts) > 0 {
		n := min(len(parts), maxPartitionsPerRecord)
		b.add(record{Type: recCreatePartitions, Name: topic, Partitions: parts[:n]})
		parts = parts[n:]
	}
}

// deleteTopic is DeleteTopics.
func (a *active) deleteTopic(ctx context.Context, body []byte) (any, int64, error) {
	var in topicReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		if _, ok := im.Topics[in.Name]; !ok {
			return kerr.UnknownTopicOrPartition
		}
		b.add(record{Type: recDeleteTopic, Name: in.Name})
		return nil
	})
	return struct{}{}, off, err
}

// createPartitions is CreatePartitions: new partitions are placed like
// creation, with the topic's replication factor, or as an explicit
// assignment gives them (metadata.AssignedPartitions: validated, replicas
// in the order given, the first active one leading).
func (a *active) createPartitions(ctx context.Context, body []byte) (any, int64, error) {
	var in createPartitionsReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	lim := a.n.limits()
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		t, ok := im.Topics[in.Name]
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		cur := int32(len(t.Partitions))
		if in.Count <= cur || in.Count > metadata.MaxPartitionsPerTopic {
			return kerr.InvalidPartitions
		}
		if err := lim.CheckTotal(metadata.NumPartitions(im), int(in.Count-cur)); err != nil {
			return err
		}
		var parts []metadata.Partition
		var err error
		if in.Assignment != nil {
			parts, err = metadata.AssignedPartitions(im, t, in.Count, in.Assignment)
			if err == nil {
				err = lim.CheckBrokers(metadata.ReplicaCounts(im), parts)
			}
		} else {
			rf := 1
			if cur > 0 {
				rf = len(t.Partitions[0].Replicas)
			}
			parts, err = a.placement(im, cur, in.Count-cur, rf, metadata.ReplicaCounts(im), lim.MaxBrokerPartitions)
		}
		if err != nil || in.ValidateOnly {
			return err
		}
		addPartitions(b, in.Name, parts)
		return nil
	})
	return struct{}{}, off, err
}

// alterConfigs is IncrementalAlterConfigs on a topic. Enabling unclean
// election elects the topic's offline partitions right after the config
// change (in the same entry unless there are too many for one).
func (a *active) alterConfigs(ctx context.Context, body []byte) (any, int64, error) {
	var in topicReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	off, err := a.decideAdmin(ctx, decideOpts{split: true}, func(im *metadata.Image, b *batch) error {
		t, ok := im.Topics[in.Name]
		if !ok {
			return kerr.UnknownTopicOrPartition
		}
		next, err := metadata.ApplyConfigOps(t.Configs, in.Ops)
		if err != nil || in.ValidateOnly {
			return err
		}
		oldMinISR := t.Configs["min.insync.replicas"] // t may be changed in place by the record
		b.add(record{Type: recConfigChange, Name: in.Name, Configs: next})
		if oldMinISR != next["min.insync.replicas"] {
			clearELR(b, in.Name) // KIP-966: the ELR was kept for the old value
		}
		a.electOffline(b, in.Name)
		return nil
	})
	return struct{}{}, off, err
}

// allocatePIDs is AllocateProducerIDs: a block of ids, committed before the
// reply, so no id is handed out twice across failovers.
func (a *active) allocatePIDs(ctx context.Context, _ []byte) (any, int64, error) {
	var resp pidResp
	off, err := a.decide(ctx, func(im *metadata.Image, b *batch) error {
		resp = pidResp{Start: im.NextProducerID, Count: producerIDBlock}
		b.add(record{Type: recProducerIDs, NextProducerID: im.NextProducerID + producerIDBlock})
		return nil
	})
	return resp, off, err
}

// alterScram is AlterUserScramCredentials: each op is checked against the
// image as changed by the ops before it; the valid ones are written as
// UserScramCredential records in one entry.
func (a *active) alterScram(ctx context.Context, body []byte) (any, int64, error) {
	var in scramReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	if len(in.Ops) > metadata.MaxScramUsers {
		return nil, 0, kerr.InvalidRequest
	}
	resp := scramResp{Codes: make([]int16, len(in.Ops)), Messages: make([]string, len(in.Ops))}
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		for i, op := range in.Ops {
			if err := metadata.CheckScramOp(im, op); err != nil {
				resp.Codes[i], resp.Messages[i] = errResponse(err).Code, err.Error()
				continue
			}
			resp.Codes[i], resp.Messages[i] = 0, ""
			b.add(record{Type: recScram, Scram: &op})
		}
		return nil
	})
	return resp, off, err
}

// createAcls is CreateAcls: the bindings are checked against the image
// (metadata.PlanCreateAcls, Kafka's AclControlManager.validateNewAcl) and
// the new valid ones written as one AccessControlEntry record.
func (a *active) createAcls(ctx context.Context, body []byte) (any, int64, error) {
	var in createAclsReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	if len(in.Bindings) > acl.MaxBindings {
		return nil, 0, kerr.InvalidRequest
	}
	resp := aclResp{Codes: make([]int16, len(in.Bindings)), Messages: make([]string, len(in.Bindings))}
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		errs, add := metadata.PlanCreateAcls(im, in.Bindings)
		for i, e := range errs {
			resp.Codes[i], resp.Messages[i] = 0, ""
			if e != nil {
				resp.Codes[i], resp.Messages[i] = errResponse(e).Code, e.Error()
			}
		}
		if len(add) > 0 {
			b.add(record{Type: recAclAdd, Acls: add})
		}
		return nil
	})
	return resp, off, err
}

// deleteAcls is DeleteAcls: the bindings the filters match in the image
// are removed by one RemoveAccessControlEntry record.
func (a *active) deleteAcls(ctx context.Context, body []byte) (any, int64, error) {
	var in deleteAclsReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	n := len(in.Filters)
	resp := aclResp{Codes: make([]int16, n), Messages: make([]string, n), Deleted: make([][]acl.Binding, n)}
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		var remove []acl.Binding
		for i, d := range metadata.PlanDeleteAcls(im, in.Filters) {
			resp.Codes[i], resp.Messages[i], resp.Deleted[i] = 0, "", d.Deleted
			if d.Err != nil {
				resp.Codes[i], resp.Messages[i] = errResponse(d.Err).Code, d.Err.Error()
			}
			remove = append(remove, d.Deleted...)
		}
		if len(remove) > 0 {
			b.add(record{Type: recAclRemove, Acls: remove})
		}
		return nil
	})
	return resp, off, err
}

// alterQuotas is AlterClientQuotas: the entries are checked against the
// image (metadata.PlanAlterQuotas, Kafka's ClientQuotaControlManager) and
// the valid ones written as one ClientQuota record.
func (a *active) alterQuotas(ctx context.Context, body []byte) (any, int64, error) {
	var in alterQuotasReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	if len(in.Entries) > metadata.MaxQuotaEntities {
		return nil, 0, kerr.InvalidRequest
	}
	resp := aclResp{Codes: make([]int16, len(in.Entries)), Messages: make([]string, len(in.Entries))}
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		errs, ok := metadata.PlanAlterQuotas(im, in.Entries)
		for i, e := range errs {
			resp.Codes[i], resp.Messages[i] = 0, ""
			if e != nil {
				resp.Codes[i], resp.Messages[i] = errResponse(e).Code, e.Error()
			}
		}
		if len(ok) > 0 {
			b.add(record{Type: recClientQuota, Quotas: ok})
		}
		return nil
	})
	return resp, off, err
}

// alterResourceConfigs is AlterConfigs or IncrementalAlterConfigs on a
// BROKER or GROUP resource: the new set is checked against the image
// (metadata.PlanResourceConfigs, with this controller's group bounds, as
// Kafka's ControllerConfigurationValidator uses its own KafkaConfig) and
// written as one ResourceConfig record. Like Kafka (KAFKA-14136), an
// unchanged broker set is written too, so that every broker applies it
// again.
func (a *active) alterResourceConfigs(ctx context.Context, body []byte) (any, int64, error) {
	var in resConfigReq
	if err := decode(body, &in); err != nil {
		return nil, 0, err
	}
	off, err := a.decideAdmin(ctx, decideOpts{}, func(im *metadata.Image, b *batch) error {
		next, err := metadata.PlanResourceConfigs(im, a.n.cfg.Broker, in.Resource, in.Ops, in.Replace)
		if err != nil || in.ValidateOnly {
			return err
		}
		r := in.Resource
		if err := checkMinISRChange(im, r, next); err != nil {
			return err
		}
		oldMinISR := im.BrokerConfigs[""]["min.insync.replicas"]
		b.add(record{Type: recResourceConfig, Resource: &r, Configs: next})
		if r.Type == metadata.ResourceBroker && r.Name == "" && oldMinISR != next["min.insync.replicas"] {
			// The cluster default changed: the ELR of every topic that
			// takes it was kept for the old value (elr.go).
			for _, name := range im.TopicNames() {
				if _, own := im.Topics[name].Configs["min.insync.replicas"]; !own {
					clearELR(b, name)
				}
			}
		}
		return nil
	})
	return struct{}{}, off, err
}
