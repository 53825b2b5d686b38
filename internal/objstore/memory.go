package objstore

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"sync"
)

// Memory is an in-memory Store for tests. The zero value is empty and ready.
type Memory struct {
	mu   sync.Mutex
	objs map[string][]byte
}

// Put implements Store.
func (m *Memory) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(body, size))
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return io.ErrUnexpectedEOF
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objs == nil {
		m.objs = make(map[string][]byte)
	}
	m.objs[key] = b
	return nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	b, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	off = min(max(off, 0), int64(len(b)))
	end := int64(len(b))
	if n >= 0 {
		end = min(end, off+n)
	}
	return io.NopCloser(bytes.NewReader(b[off:end])), nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}
