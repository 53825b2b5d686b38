package handler

// DeleteTopics, versions 0-6. Topics are named (v0-5 TopicNames, v6 Topics
// by name or TopicID). Deletion is synchronous: the data is gone when the
// response is sent.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
)

func (h *Handlers) deleteTopics(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version < 6 {
		for i := range req.TopicNames {
			targets = append(targets, target{name: &req.TopicNames[i]})
		}
	} else {
		for _, t := range req.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		var err error
		// DELETE on the topic (KafkaApis.handleDeleteTopicsRequest).
		switch {
		case tg.name != nil && !h.allowedTopic(r, *tg.name, acl.OpDelete):
			err = kerr.TopicAuthorizationFailed
		case tg.name != nil:
			err = h.b.DeleteTopic(*tg.name)
		default:
			t := h.b.Image().TopicByID(metadata.UUID(tg.id))
			if t == nil {
				err = kerr.UnknownTopicID
				break
			}
			if !h.allowedTopic(r, t.Name, acl.OpDelete) {
				err = kerr.TopicAuthorizationFailed // the name is not revealed
				break
			}
			name := t.Name
			st.Topic = &name
			err = h.b.DeleteTopic(name)
		}
		st.ErrorCode = code(err)
		if req.Version >= 5 {
			st.ErrorMessage = message(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return protocol.Reply{Resp: resp}
}
