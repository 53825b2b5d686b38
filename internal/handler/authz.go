package handler

// Authorization: with authorizer.class.name set to Kafka's
// StandardAuthorizer (or AclAuthorizer), each handler checks what Kafka's
// KafkaApis checks, against the ACLs of the metadata image, with the
// connection's principal and client address (internal/acl decides).
// Without it every request is allowed, as in Kafka.

import (
	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/config"
	"github.com/sluice-io/sluice/internal/protocol"
)

// authorizerFromConfig returns the authorizer of authorizer.class.name,
// super.users and allow.everyone.if.no.acl.found, nil when none is
// configured.
func authorizerFromConfig(cfg *config.Broker) *acl.Authorizer {
	class, _ := cfg.Get("authorizer.class.name")
	if class == "" || acl.CheckClass(class) != nil {
		return nil
	}
	supers, _ := cfg.Get("super.users")
	return acl.New(supers, cfg.Bool("allow.everyone.if.no.acl.found", false))
}

// allowed reports whether r's principal may do op on the resource (always
// true without an authorizer).
func (h *Handlers) allowed(r *protocol.Request, t acl.ResourceType, name string, op acl.Operation) bool {
	if h.auth == nil {
		return true
	}
	return h.auth.Authorize(h.b.Image().Acls, r.Conn.Principal(), r.Conn.ClientHost(), t, name, op)
}

// allowedTopic is allowed for a topic.
func (h *Handlers) allowedTopic(r *protocol.Request, topic string, op acl.Operation) bool {
	return h.allowed(r, acl.ResourceTopic, topic, op)
}

// allowedGroup is allowed for a consumer group.
func (h *Handlers) allowedGroup(r *protocol.Request, group string, op acl.Operation) bool {
	return h.allowed(r, acl.ResourceGroup, group, op)
}

// allowedCluster is allowed for the cluster resource.
func (h *Handlers) allowedCluster(r *protocol.Request, op acl.Operation) bool {
	return h.allowed(r, acl.ResourceCluster, acl.ClusterName, op)
}

// allowedAnyTopic reports whether r's principal may do op on some topic
// (Authorizer.authorizeByResourceType).
func (h *Handlers) allowedAnyTopic(r *protocol.Request, op acl.Operation) bool {
	if h.auth == nil {
		return true
	}
	return h.auth.AuthorizeAny(h.b.Image().Acls, r.Conn.Principal(), r.Conn.ClientHost(), acl.ResourceTopic, op)
}
