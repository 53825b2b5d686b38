package handler

// AlterUserScramCredentials, version 0 (KIP-554): upserts (a salt and
// salted password computed by the client, and the iteration count) and
// deletions of users' SCRAM credentials, committed through the controller
// into the replicated metadata (metadata.ScramAlterer), from which every
// broker's SCRAM listeners authenticate. Per user: an unknown mechanism is
// UNSUPPORTED_SASL_MECHANISM; an empty name, empty salt or iterations
// outside [4096, 16384] UNACCEPTABLE_CREDENTIAL; a deletion of a missing
// credential RESOURCE_NOT_FOUND; a user altered twice in one request
// DUPLICATE_RESOURCE (Kafka's rules). The stored credential is Kafka's:
// StoredKey and ServerKey derived from the salted password, never the
// password. With an authorizer the caller needs ALTER on the cluster
// (CLUSTER_AUTHORIZATION_FAILED for every user).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/metadata"
	"github.com/sluice-io/sluice/internal/protocol"
	"github.com/sluice-io/sluice/internal/security"
)

// scramAlterTimeout bounds the controller round trip.
const scramAlterTimeout = 30 * time.Second

func (h *Handlers) alterUserScramCredentials(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type item struct {
		user string
		err  *kerr.Error
		msg  string
		op   int // index in ops, -1 if none
	}
	var items []item
	count := map[string]int{}
	for _, d := range req.Deletions {
		count[d.Name]++
	}
	for _, u := range req.Upsertions {
		count[u.Name]++
	}
	var ops []metadata.ScramOp
	clusterOK := h.allowedCluster(r, acl.OpAlter)
	add := func(user string, op metadata.ScramOp, bad *kerr.Error, msg string) {
		it := item{user: user, err: bad, msg: msg, op: -1}
		if !clusterOK {
			it.err, it.msg = kerr.ClusterAuthorizationFailed, "ALTER on the cluster is needed"
		}
		if bad == nil && count[user] > 1 {
			it.err, it.msg = kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"
		}
		if it.err == nil {
			it.op = len(ops)
			ops = append(ops, op)
		}
		items = append(items, it)
	}
	for _, d := range req.Deletions {
		mech, ok := scramMechanisms[d.Mechanism]
		if !ok {
			add(d.Name, metadata.ScramOp{}, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
			continue
		}
		add(d.Name, metadata.ScramOp{User: d.Name, Mechanism: mech, Delete: true}, nil, "")
	}
	for _, u := range req.Upsertions {
		mech, ok := scramMechanisms[u.Mechanism]
		if !ok {
			add(u.Name, metadata.ScramOp{}, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
			continue
		}
		if len(u.Salt) == 0 || len(u.SaltedPassword) == 0 {
			add(u.Name, metadata.ScramOp{}, kerr.UnacceptableCredential, "Empty salt or salted password")
			continue
		}
		cred, err := security.ScramFromSalted(mech, u.Salt, u.SaltedPassword, u.Iterations)
		if err != nil {
			add(u.Name, metadata.ScramOp{}, kerr.UnacceptableCredential, err.Error())
			continue
		}
		add(u.Name, metadata.ScramOp{User: u.Name, Mechanism: mech, Cred: cred}, nil, "")
	}
	answer := func(errs []error) kmsg.Response {
		for _, it := range items {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User = it.user
			if it.err != nil {
				res.ErrorCode, res.ErrorMessage = it.err.Code, kmsg.StringPtr(it.msg)
			} else if err := errs[it.op]; err != nil {
				res.ErrorCode, res.ErrorMessage = code(err), message(err)
			}
			resp.Results = append(resp.Results, res)
		}
		return resp
	}
	if len(ops) == 0 {
		return protocol.Reply{Resp: answer(nil)}
	}
	sa, ok := h.b.Controller().(metadata.ScramAlterer)
	return protocol.Reply{Await: func() kmsg.Response {
		errs := make([]error, len(ops))
		var err error
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), scramAlterTimeout)
			defer cancel()
			var got []error
			if got, err = sa.AlterScramCredentials(ctx, ops); err == nil {
				copy(errs, got)
			}
		} else {
			err = kerr.UnsupportedVersion
		}
		if err != nil {
			for i := range errs {
				errs[i] = err
			}
		}
		return answer(errs)
	}}
}
