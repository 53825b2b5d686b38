package consumer

import "github.com/sluice-io/sluice/internal/group/recwire"

// The record encoding shared with the other group record packages.
type (
	writer = recwire.Writer
	reader = recwire.Reader
	tagged = recwire.Tagged
)

// errInvalid is returned for a length or count that cannot be right.
var errInvalid = recwire.ErrInvalid
