package metadata

// Client quotas (KIP-13, KIP-55 user quotas, KIP-124 request quotas,
// KIP-546 AlterClientQuotas/DescribeClientQuotas): the quota values of
// each entity, stored in the replicated metadata as Kafka stores
// ClientQuotaRecords, validated as Kafka's ClientQuotaControlManager does.
// Enforcement is the broker's (internal/quota, Kafka's ClientQuotaManager).

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The quota keys (Kafka's QuotaConfigs).
const (
	// QuotaProducerByteRate is producer_byte_rate, bytes/s produced.
	QuotaProducerByteRate = "producer_byte_rate"
	// QuotaConsumerByteRate is consumer_byte_rate, bytes/s fetched.
	QuotaConsumerByteRate = "consumer_byte_rate"
	// QuotaRequestPercentage is request_percentage (KIP-124), percent of
	// one request handler thread.
	QuotaRequestPercentage = "request_percentage"
	// QuotaControllerMutationRate is controller_mutation_rate (KIP-599),
	// partition mutations/s; stored, not enforced.
	QuotaControllerMutationRate = "controller_mutation_rate"
)

// MaxQuotaEntities bounds the entities with quotas.
const MaxQuotaEntities = 10000

// QuotaName is one component of a quota entity: absent (Set false), the
// default (Kafka's null name, "<default>"), or a name.
type QuotaName struct {
	Set     bool   `json:"set,omitempty"`
	Default bool   `json:"default,omitempty"`
	Name    string `json:"name,omitempty"`
}

// QuotaEntity is a client-quota entity (Kafka's ClientQuotaEntity): a
// user, a client id, or both.
type QuotaEntity struct {
	User     QuotaName `json:"user"`
	ClientID QuotaName `json:"clientId"`
}

// String is the entity as kafka-configs.sh names it.
func (e QuotaEntity) String() string {
	part := func(t string, n QuotaName) string {
		if n.Default {
			return t + "=<default>"
		}
		return t + "=" + n.Name
	}
	switch {
	case e.User.Set && e.ClientID.Set:
		return part("user", e.User) + "," + part("client-id", e.ClientID)
	case e.User.Set:
		return part("user", e.User)
	default:
		return part("client-id", e.ClientID)
	}
}

// ClientQuota is the quota values of one entity.
type ClientQuota struct {
	Entity QuotaEntity        `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// QuotaOp sets (or, with Remove, removes) one key of an entity.
type QuotaOp struct {
	Key    string  `json:"key"`
	Value  float64 `json:"value,omitempty"`
	Remove bool    `json:"remove,omitempty"`
}

// QuotaAlteration is one entry of AlterClientQuotas.
type QuotaAlteration struct {
	Entity QuotaEntity `json:"entity"`
	Ops    []QuotaOp   `json:"ops"`
}

// QuotaAlterer is a Controller that stores client quotas
// (AlterClientQuotas). Local and the Raft controller are.
type QuotaAlterer interface {
	// AlterClientQuotas checks each entry (PlanAlterQuotas), commits the
	// valid ones together and returns one error per entry. The error
	// return is for the call as a whole.
	AlterClientQuotas(ctx context.Context, entries []QuotaAlteration) ([]error, error)
}

// QuotaOf returns the value of key for exactly entity e.
func (im *Image) QuotaOf(e QuotaEntity, key string) (float64, bool) {
	i, ok := findQuota(im.Quotas, e)
	if !ok {
		return 0, false
	}
	v, ok := im.Quotas[i].Values[key]
	return v, ok
}

// sortKey orders entities: by user, then client id; absent, then
// default, then by name.
func (e QuotaEntity) sortKey() string {
	part := func(n QuotaName) string {
		switch {
		case !n.Set:
			return "0"
		case n.Default:
			return "1"
		}
		return "2" + n.Name
	}
	return part(e.User) + "\x00" + part(e.ClientID)
}

func quotaLess(a, b QuotaEntity) int {
	return strings.Compare(a.sortKey(), b.sortKey())
}

func findQuota(qs []ClientQuota, e QuotaEntity) (int, bool) {
	return slices.BinarySearchFunc(qs, e, func(q ClientQuota, e QuotaEntity) int { return quotaLess(q.Entity, e) })
}

// checkQuotaOp checks one key and value (ClientQuotaControlManager's
// validateQuotaKeyValue): the key must be a quota of the entity, a LONG
// quota an integer, and a value positive and finite.
func checkQuotaOp(e QuotaEntity, op QuotaOp) error {
	long := false
	switch op.Key {
	case QuotaProducerByteRate, QuotaConsumerByteRate:
		long = true
	case QuotaRequestPercentage, QuotaControllerMutationRate:
	default:
		return fmt.Errorf("%w: invalid configuration key %s for entity %s", kerr.InvalidRequest, op.Key, e)
	}
	if op.Remove {
		return nil
	}
	if math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0 {
		return fmt.Errorf("%w: illegal value %v for %s: quota values must be positive", kerr.InvalidRequest, op.Value, op.Key)
	}
	if long && (op.Value != math.Trunc(op.Value) || op.Value > math.MaxInt64) {
		return fmt.Errorf("%w: configuration %s must be a Long value", kerr.InvalidRequest, op.Key)
	}
	return nil
}

// CheckQuotaEntity checks an entity built from a request: at least one
// component, a name never empty (Kafka: "Empty user not supported").
func CheckQuotaEntity(e QuotaEntity) error {
	if !e.User.Set && !e.ClientID.Set {
		return fmt.Errorf("%w: invalid empty client quota entity", kerr.InvalidRequest)
	}
	if e.User.Set && !e.User.Default && e.User.Name == "" {
		return fmt.Errorf("%w: empty user not supported", kerr.InvalidRequest)
	}
	if e.ClientID.Set && !e.ClientID.Default && e.ClientID.Name == "" {
		return fmt.Errorf("%w: empty client-id not supported", kerr.InvalidRequest)
	}
	return nil
}

// PlanAlterQuotas checks entries against im and returns the per-entry
// errors and the valid entries. An entry with any invalid op is refused
// whole; entities beyond MaxQuotaEntities are POLICY_VIOLATION.
func PlanAlterQuotas(im *Image, entries []QuotaAlteration) (errs []error, ok []QuotaAlteration) {
	errs = make([]error, len(entries))
	n := len(im.Quotas)
	seen := map[QuotaEntity]bool{}
	for i, a := range entries {
		if errs[i] = CheckQuotaEntity(a.Entity); errs[i] != nil {
			continue
		}
		keys := map[string]bool{}
		for _, op := range a.Ops {
			if errs[i] = checkQuotaOp(a.Entity, op); errs[i] != nil {
				break
			}
			if keys[op.Key] {
				errs[i] = fmt.Errorf("%w: key %s appears more than once for entity %s", kerr.InvalidRequest, op.Key, a.Entity)
				break
			}
			keys[op.Key] = true
		}
		if errs[i] != nil {
			continue
		}
		if _, found := findQuota(im.Quotas, a.Entity); !found && !seen[a.Entity] {
			if n >= MaxQuotaEntities {
				errs[i] = fmt.Errorf("%w: at most %d client quota entities", kerr.PolicyViolation, MaxQuotaEntities)
				continue
			}
			n++
		}
		seen[a.Entity] = true
		ok = append(ok, a)
	}
	return errs, ok
}

// ApplyQuotas applies checked alterations to im. im.Quotas is replaced,
// never changed in place, so clones and images handed out share it; an
// entity left without values is dropped.
func ApplyQuotas(im *Image, entries []QuotaAlteration) {
	if len(entries) == 0 {
		return
	}
	qs := slices.Clone(im.Quotas)
	for _, a := range entries {
		i, found := findQuota(qs, a.Entity)
		vals := map[string]float64{}
		if found {
			for k, v := range qs[i].Values {
				vals[k] = v
			}
		}
		for _, op := range a.Ops {
			if op.Remove {
				delete(vals, op.Key)
			} else {
				vals[op.Key] = op.Value
			}
		}
		switch {
		case found && len(vals) == 0:
			qs = slices.Delete(qs, i, i+1)
		case found:
			qs[i] = ClientQuota{Entity: a.Entity, Values: vals}
		case len(vals) > 0:
			qs = slices.Insert(qs, i, ClientQuota{Entity: a.Entity, Values: vals})
		}
	}
	if len(qs) == 0 {
		qs = nil
	}
	im.Quotas = qs
}

// QuotaComponent is one component of a DescribeClientQuotas filter.
type QuotaComponent struct {
	// Type is "user", "client-id" or "ip".
	Type string
	// MatchType is 0 (exact: Match, the default entity when Match is
	// nil), 1 (the default entity) or 2 (any specified name).
	MatchType int8
	Match     *string
}

// DescribeQuotas returns the stored quotas that components match
// (ClientQuotasImage.describe): with strict, only entities with exactly
// the filtered types. Errors are INVALID_REQUEST, or UNSUPPORTED_VERSION
// for an unknown entity type.
func DescribeQuotas(im *Image, components []QuotaComponent, strict bool) ([]ClientQuota, error) {
	type match struct {
		typ  int8
		name *string
	}
	byType := map[string]match{}
	for _, c := range components {
		if c.Type == "" {
			return nil, fmt.Errorf("%w: invalid empty entity type", kerr.InvalidRequest)
		}
		if _, dup := byType[c.Type]; dup {
			return nil, fmt.Errorf("%w: entity type %s cannot appear more than once in the filter", kerr.InvalidRequest, c.Type)
		}
		if c.Type != "user" && c.Type != "client-id" && c.Type != "ip" {
			return nil, fmt.Errorf("%w: unsupported entity type %s", kerr.UnsupportedVersion, c.Type)
		}
		switch c.MatchType {
		case 0:
			// Kafka 2.6+ reads a null EXACT match as the default.
		case 1, 2:
			if c.Match != nil {
				return nil, fmt.Errorf("%w: match type %d with a match string", kerr.InvalidRequest, c.MatchType)
			}
		default:
			return nil, fmt.Errorf("%w: unknown match type %d", kerr.InvalidRequest, c.MatchType)
		}
		byType[c.Type] = match{c.MatchType, c.Match}
	}
	if _, ip := byType["ip"]; ip && len(byType) > 1 {
		return nil, fmt.Errorf("%w: invalid entity filter component combination: an ip filter component cannot be used with user or client-id", kerr.InvalidRequest)
	}
	if _, ip := byType["ip"]; ip {
		return nil, nil // ip quotas are not stored
	}
	matches := func(n QuotaName, m match, filtered bool) bool {
		if !filtered {
			return !strict || !n.Set
		}
		if !n.Set {
			return false
		}
		switch m.typ {
		case 0:
			if m.name == nil {
				return n.Default
			}
			return !n.Default && n.Name == *m.name
		case 1:
			return n.Default
		}
		return !n.Default
	}
	var out []ClientQuota
	for _, q := range im.Quotas {
		mu, fu := byType["user"]
		mc, fc := byType["client-id"]
		if matches(q.Entity.User, mu, fu) && matches(q.Entity.ClientID, mc, fc) {
			out = append(out, q)
		}
	}
	return out, nil
}

// AlterClientQuotas implements QuotaAlterer.
func (l *Local) AlterClientQuotas(_ context.Context, entries []QuotaAlteration) ([]error, error) {
	var errs []error
	err := l.store.Update(func(im *Image) error {
		var ok []QuotaAlteration
		errs, ok = PlanAlterQuotas(im, entries)
		ApplyQuotas(im, ok)
		return nil
	})
	return errs, err
}
