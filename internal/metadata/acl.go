package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/internal/acl"
)

// AclAlterer is a Controller that stores ACL bindings (CreateAcls,
// DeleteAcls; Kafka's AclControlManager). Local and the Raft controller
// are.
type AclAlterer interface {
	// CreateAcls checks each binding (PlanCreateAcls), commits the valid
	// ones together and returns one error per binding (nil: stored, or
	// already present). The error return is for the call as a whole.
	CreateAcls(ctx context.Context, bindings []acl.Binding) ([]error, error)
	// DeleteAcls removes the bindings each filter matches, committed
	// together, and returns per filter its error or the bindings it
	// removed.
	DeleteAcls(ctx context.Context, filters []acl.Filter) ([]AclDeletion, error)
}

// AclDeletion is the outcome of one DeleteAcls filter.
type AclDeletion struct {
	Err     error
	Deleted []acl.Binding
}

// PlanCreateAcls checks bindings against im (acl.ValidateBinding and the
// bound on stored bindings) and returns the per-binding errors and the
// bindings to add. A binding already stored is accepted and not added
// again (AclControlManager.createAcls).
func PlanCreateAcls(im *Image, bindings []acl.Binding) (errs []error, add []acl.Binding) {
	errs = make([]error, len(bindings))
	seen := map[acl.Binding]bool{}
	n := im.Acls.Len()
	for i, b := range bindings {
		if errs[i] = acl.ValidateBinding(b); errs[i] != nil {
			continue
		}
		if im.Acls.Contains(b) || seen[b] {
			continue
		}
		if n >= acl.MaxBindings {
			errs[i] = fmt.Errorf("%w: at most %d ACLs", kerr.InvalidRequest, acl.MaxBindings)
			continue
		}
		seen[b] = true
		add = append(add, b)
		n++
	}
	return errs, add
}

// PlanDeleteAcls returns per filter its error (acl.ValidateFilter) or the
// stored bindings it matches; a binding matched by an earlier filter of
// the request is not listed again (AclControlManager.deleteAcls).
func PlanDeleteAcls(im *Image, filters []acl.Filter) []AclDeletion {
	out := make([]AclDeletion, len(filters))
	gone := map[acl.Binding]bool{}
	for i, f := range filters {
		if out[i].Err = acl.ValidateFilter(f); out[i].Err != nil {
			continue
		}
		for _, b := range im.Acls.Matching(f) {
			if !gone[b] {
				gone[b] = true
				out[i].Deleted = append(out[i].Deleted, b)
			}
		}
	}
	return out
}

// AddAcls adds bindings to im (a new set: images handed out are
// immutable).
func AddAcls(im *Image, bindings []acl.Binding) {
	if len(bindings) > 0 {
		im.Acls = im.Acls.With(bindings...)
	}
}

// RemoveAcls removes bindings from im.
func RemoveAcls(im *Image, bindings []acl.Binding) {
	if len(bindings) > 0 {
		im.Acls = im.Acls.Without(bindings...)
	}
}

// CreateAcls implements AclAlterer.
func (l *Local) CreateAcls(_ context.Context, bindings []acl.Binding) ([]error, error) {
	var errs []error
	err := l.store.Update(func(im *Image) error {
		var add []acl.Binding
		errs, add = PlanCreateAcls(im, bindings)
		AddAcls(im, add)
		return nil
	})
	return errs, err
}

// DeleteAcls implements AclAlterer.
func (l *Local) DeleteAcls(_ context.Context, filters []acl.Filter) ([]AclDeletion, error) {
	var out []AclDeletion
	err := l.store.Update(func(im *Image) error {
		out = PlanDeleteAcls(im, filters)
		for _, d := range out {
			RemoveAcls(im, d.Deleted)
		}
		return nil
	})
	return out, err
}
