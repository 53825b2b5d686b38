// Package objstore is the object store that tiered storage (KIP-405) keeps
// remote log segments in: a small interface (Put, Get of a byte range,
// Delete, List), implemented by an S3 client and by Memory, an in-memory
// store for tests.
package objstore

import (
	"context"
	"errors"
	"io"
)

// ErrNotFound is returned by Get and Delete implementations for a key that
// does not exist (S3's NoSuchKey). Delete of a missing key is not an error.
var ErrNotFound = errors.New("objstore: object not found")

// Store is an object store. Keys are slash-separated paths; a Put replaces
// the whole object atomically (a reader sees the old object, the new one,
// or none, never part of one). Every method honours ctx's deadline.
type Store interface {
	// Put writes the object key with size bytes read from body.
	Put(ctx context.Context, key string, body io.Reader, size int64) error
	// Get returns n bytes of the object key starting at off (n < 0: to the
	// end). A range past the end is cut short at the end. The caller closes
	// the reader. A missing key gives ErrNotFound.
	Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	// Delete removes the object key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys that start with prefix, in lexical order.
	List(ctx context.Context, prefix string) ([]string, error)
}
