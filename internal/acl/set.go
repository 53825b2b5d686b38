package acl

import (
	"cmp"
	"encoding/json"
	"slices"
)

// MaxBindings bounds the ACLs a cluster stores (a bound on the metadata,
// as for SCRAM users); CreateAcls beyond it is INVALID_REQUEST.
const MaxBindings = 100000

// Set is an immutable set of bindings, indexed for the authorizer: With
// and Without return new sets. A nil *Set is the empty set. It is stored
// in the metadata image as a JSON list.
type Set struct {
	list []Binding // sorted by compare, unique
	// literal indexes list by resource type and literal name; prefixed
	// lists each type's prefixed bindings.
	literal  map[resKey][]int
	prefixed map[ResourceType][]int
}

type resKey struct {
	t    ResourceType
	name string
}

func compare(a, b Binding) int {
	return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.PatternType, b.PatternType),
		cmp.Compare(a.ResourceName, b.ResourceName), cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Host, b.Host),
		cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
}

// NewSet returns the set of bs (duplicates dropped).
func NewSet(bs []Binding) *Set {
	list := slices.Clone(bs)
	slices.SortFunc(list, compare)
	list = slices.Compact(list)
	s := &Set{list: list, literal: map[resKey][]int{}, prefixed: map[ResourceType][]int{}}
	for i, b := range list {
		if b.PatternType == PatternPrefixed {
			s.prefixed[b.ResourceType] = append(s.prefixed[b.ResourceType], i)
		} else {
			k := resKey{b.ResourceType, b.ResourceName}
			s.literal[k] = append(s.literal[k], i)
		}
	}
	return s
}

// Len is the number of bindings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.list)
}

// Bindings returns the bindings, sorted (a copy).
func (s *Set) Bindings() []Binding {
	if s == nil {
		return nil
	}
	return slices.Clone(s.list)
}

// Contains reports whether b is in the set.
func (s *Set) Contains(b Binding) bool {
	if s == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(s.list, b, compare)
	return ok
}

// With returns the set with bs added.
func (s *Set) With(bs ...Binding) *Set {
	return NewSet(append(s.Bindings(), bs...))
}

// Without returns the set with bs removed.
func (s *Set) Without(bs ...Binding) *Set {
	drop := NewSet(bs)
	return NewSet(slices.DeleteFunc(s.Bindings(), drop.Contains))
}

// Matching returns the bindings f selects, sorted.
func (s *Set) Matching(f Filter) []Binding {
	var out []Binding
	if s == nil {
		return nil
	}
	for _, b := range s.list {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	return out
}

// forResource calls fn with every binding whose pattern covers the
// resource: the literal name, the literal wildcard and the prefixed
// patterns the name starts with (StandardAuthorizerData's search).
func (s *Set) forResource(t ResourceType, name string, fn func(Binding)) {
	if s == nil {
		return
	}
	for _, i := range s.literal[resKey{t, name}] {
		fn(s.list[i])
	}
	if name != WildcardResource {
		for _, i := range s.literal[resKey{t, WildcardResource}] {
			fn(s.list[i])
		}
	}
	for _, i := range s.prefixed[t] {
		if b := s.list[i]; len(name) >= len(b.ResourceName) && name[:len(b.ResourceName)] == b.ResourceName {
			fn(b)
		}
	}
}

// MarshalJSON writes the set as a list of bindings.
func (s *Set) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	return json.Marshal(s.list)
}

// UnmarshalJSON reads a list of bindings.
func (s *Set) UnmarshalJSON(data []byte) error {
	var bs []Binding
	if err := json.Unmarshal(data, &bs); err != nil {
		return err
	}
	*s = *NewSet(bs)
	return nil
}
