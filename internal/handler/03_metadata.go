package handler

// Metadata, versions 0-12 (v12 is v11's format; Kafka serves lookups by
// topic id from v12, and librdkafka's KIP-848 consumer asks by id only
// from a broker that advertises it).
//
// A null topic list (v1+) or an empty one (v0) asks for every topic.
// Unknown topics are created when auto.create.topics.enable is true and the
// request allows it (AllowAutoTopicCreation, v4+; always for v0-v3), with
// num.partitions and default.replication.factor; creation is synchronous, so
// the topic is returned ready. Topics may be named by TopicID (v10+).
//
// Brokers are given by their endpoints on the listener the request came
// in on (advertised.listeners); a broker without that listener is left out
// and a partition it leads is LISTENER_NOT_FOUND, as in Kafka.
//
// With an authorizer (KafkaApis.handleTopicMetadataRequest): the list of
// every topic holds only those the principal may DESCRIBE; a topic named
// without DESCRIBE is TOPIC_AUTHORIZATION_FAILED (UNKNOWN_TOPIC_ID when
// named by id, revealing nothing); auto-creation needs CREATE on the
// cluster or the topic, else TOPIC_AUTHORIZATION_FAILED. v8+ reports the
// topics' and the cluster's authorized operations when asked (KIP-430,
// authorized_ops.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/broker"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) metadata(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	// A node not caught up with the metadata log does not know which topics
	// exist: it neither creates nor denies one (LEADER_NOT_AVAILABLE, which
	// clients retry, instead of UNKNOWN_TOPIC_OR_PARTITION, which franz-go
	// fails records on after a few tries). Kafka does not serve at all then.
	current := h.b.CaughtUp()
	autoCreate := current && h.b.Config().Bool("auto.create.topics.enable", true) && (req.Version < 4 || req.AllowAutoTopicCreation)
	describable := map[string]bool{}
	canDescribe := func(name string) bool {
		ok, seen := describable[name]
		if !seen {
			ok = h.allowedTopic(r, name, acl.OpDescribe)
			describable[name] = ok
		}
		return ok
	}
	canCreate := func(name string) bool {
		return h.allowedCluster(r, acl.OpCreate) || h.allowedTopic(r, name, acl.OpCreate)
	}
	if !all {
		img := h.b.Image()
		for _, rt := range req.Topics {
			if rt.Topic == nil || !autoCreate || !canDescribe(*rt.Topic) {
				continue
			}
			if _, ok := img.Topics[*rt.Topic]; !ok && broker.ValidateTopicName(*rt.Topic) == nil && canCreate(*rt.Topic) {
				if err := h.b.CreateTopic(*rt.Topic, -1, -1, nil, false); err != nil && err != kerr.TopicAlreadyExists {
					h.b.Logger().Warn("auto-create topic", "topic", *rt.Topic, "err", err)
				}
			}
		}
	}
	img := h.b.Image()
	for _, id := range img.BrokerIDs() {
		br := img.Brokers[id]
		if br.Fenced {
			continue // KRaft lists only live brokers
		}
		host, port, ok := endpoint(r, br)
		if !ok {
			continue // not on the listener this request came in on
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = br.ID, host, port
		if br.Rack != "" {
			mb.Rack = kmsg.StringPtr(br.Rack) // broker.rack (v1+)
		}
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := img.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = h.b.NodeID()
	if all {
		for _, name := range img.TopicNames() {
			if !canDescribe(name) {
				continue
			}
			resp.Topics = append(resp.Topics, topicMetadata(img, img.Topics[name], r.Conn.Listener()))
		}
		h.metadataAuthorizedOps(r, req, resp)
		return protocol.Reply{Resp: resp}
	}
	for _, rt := range req.Topics {
		var t *metadata.Topic
		if rt.Topic != nil {
			t = img.Topics[*rt.Topic]
		} else {
			t = img.TopicByID(metadata.UUID(rt.TopicID))
		}
		denied := rt.Topic != nil && !canDescribe(*rt.Topic)
		if rt.Topic != nil && t == nil && autoCreate && !denied && broker.ValidateTopicName(*rt.Topic) == nil && !canCreate(*rt.Topic) {
			denied = true
		}
		if denied {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID, mt.ErrorCode = rt.Topic, rt.TopicID, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if t != nil && rt.Topic == nil && !canDescribe(t.Name) {
			t = nil // by id: UNKNOWN_TOPIC_ID, as if it did not exist
		}
		if t == nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.TopicID = rt.TopicID
			mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if !current {
				mt.ErrorCode = kerr.LeaderNotAvailable.Code
			}
			if rt.Topic != nil && broker.ValidateTopicName(*rt.Topic) != nil {
				mt.ErrorCode = kerr.InvalidTopicException.Code
			} else if rt.Topic == nil {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, topicMetadata(img, t, r.Conn.Listener()))
	}
	h.metadataAuthorizedOps(r, req, resp)
	return protocol.Reply{Resp: resp}
}

// topicMetadata describes a topic; replicas on fenced or unregistered
// brokers are reported offline. A partition whose leader has no endpoint
// on the request's listener is LISTENER_NOT_FOUND (Kafka's
// KRaftMetadataCache).
func topicMetadata(img *metadata.Image, t *metadata.Topic, listener string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternal(name)
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = append([]int32(nil), p.Replicas...)
		mp.ISR = append([]int32(nil), p.ISR...)
		mp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			if br, ok := img.Brokers[r]; !ok || br.Fenced {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		} else if br, ok := img.Brokers[p.Leader]; ok {
			if _, ok := br.Endpoint(listener); !ok {
				mp.ErrorCode = kerr.ListenerNotFound.Code
			}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// metadataAuthorizedOps fills the authorized operations Metadata v8+ asks
// for (KIP-430): each listed topic's, and the cluster's (v8-10).
func (h *Handlers) metadataAuthorizedOps(r *protocol.Request, req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			if t := resp.Topics[i].Topic; t != nil && resp.Topics[i].ErrorCode == 0 {
				resp.Topics[i].AuthorizedOperations = h.authorizedOps(r, acl.ResourceTopic, *t, topicOps)
			}
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = h.authorizedOps(r, acl.ResourceCluster, acl.ClusterName, clusterOps)
	}
}
