package handler

// DescribeUserScramCredentials, version 0 (KIP-554): the mechanisms and
// iteration counts of users' SCRAM credentials (never the salts or keys).
// A null user list describes every user with a credential; a named user
// without one is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE.
// With an authorizer the caller needs DESCRIBE on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).

import (
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/internal/acl"
	"github.com/sluice-io/sluice/internal/protocol"
)

// scramMechanisms are Kafka's ScramMechanism type codes.
var scramMechanisms = map[int8]string{1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

func scramMechanismCode(name string) int8 {
	for c, n := range scramMechanisms {
		if n == name {
			return c
		}
	}
	return 0
}

func (h *Handlers) describeUserScramCredentials(r *protocol.Request) protocol.Reply {
	req := r.Body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !h.allowedCluster(r, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return protocol.Reply{Resp: resp}
	}
	img := h.b.Image()
	var users []string
	if req.Users == nil {
		for u := range img.Scram {
			users = append(users, u)
		}
		sort.Strings(users)
	} else {
		for _, u := range req.Users {
			users = append(users, u.Name)
		}
	}
	count := map[string]int{}
	for _, u := range users {
		count[u]++
	}
	for _, u := range users {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = u
		switch creds := img.Scram[u]; {
		case count[u] > 1:
			res.ErrorCode = kerr.DuplicateResource.Code
			res.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
		case len(creds) == 0:
			res.ErrorCode = kerr.ResourceNotFound.Code
			res.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u)
		default:
			var mechs []string
			for m := range creds {
				mechs = append(mechs, m)
			}
			slices.Sort(mechs)
			for _, m := range mechs {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = scramMechanismCode(m), creds[m].Iterations
				res.CredentialInfos = append(res.CredentialInfos, ci)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return protocol.Reply{Resp: resp}
}
