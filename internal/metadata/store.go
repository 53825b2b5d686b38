package metadata

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"sync"

	"github.com/sluice-io/sluice/internal/vfs"
)

// Store keeps the image of a single-node cluster in one JSON file, replaced
// atomically (write temp, fsync, rename, fsync dir) on every change, so a
// change that returned survives kill -9 and power loss.
type Store struct {
	fs   vfs.FS
	dir  string
	mu   sync.Mutex
	img  *Image
	subs []func(*Image)
}

const fileName = "metadata.json"

// maxFileBytes bounds the metadata file read at startup.
const maxFileBytes = 256 << 20

// OpenStore loads the image from dir, or starts an empty one whose cluster
// id is newClusterID ("" for a random one).
func OpenStore(fsys vfs.FS, dir, newClusterID string) (*Store, error) {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &Store{fs: fsys, dir: dir}
	data, err := vfs.ReadFile(fsys, path.Join(dir, fileName), maxFileBytes)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		s.img = NewImage()
		if newClusterID != "" {
			s.img.ClusterID = newClusterID
		}
		return s, s.persist(s.img)
	}
	img := NewImage()
	if err := json.Unmarshal(data, img); err != nil {
		return nil, fmt.Errorf("metadata: %s: %w", fileName, err)
	}
	if img.Topics == nil {
		img.Topics = map[string]*Topic{}
	}
	if img.Brokers == nil {
		img.Brokers = map[int32]Broker{}
	}
	s.img = img
	return s, nil
}

// ReadStore reads the image of the single-node metadata kept in dir
// without opening or changing anything: nil when dir holds none. A node
// migrating that metadata into its controller quorum reads it here.
func ReadStore(fsys vfs.FS, dir string) (*Image, error) {
	data, err := vfs.ReadFile(fsys, path.Join(dir, fileName), maxFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	img := &Image{}
	if err := json.Unmarshal(data, img); err != nil {
		return nil, fmt.Errorf("metadata: %s: %w", path.Join(dir, fileName), err)
	}
	if img.Topics == nil {
		img.Topics = map[string]*Topic{}
	}
	return img, nil
}

// StoredClusterID reads the cluster id of the single-node metadata kept in
// dir without opening or changing anything: "" when dir holds none.
func StoredClusterID(fsys vfs.FS, dir string) (string, error) {
	data, err := vfs.ReadFile(fsys, path.Join(dir, fileName), maxFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var head struct {
		ClusterID string `json:"clusterId"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return "", fmt.Errorf("metadata: %s: %w", path.Join(dir, fileName), err)
	}
	return head.ClusterID, nil
}

// Image returns the current image. Callers must not modify it.
func (s *Store) Image() *Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.img
}

// Subscribe registers fn to be called (with the store locked, so in order)
// after every committed change.
func (s *Store) Subscribe(fn func(*Image)) {
	s.mu.Lock()
	s.subs = append(s.subs, fn)
	s.mu.Unlock()
}

// Update applies fn to a copy of the image and, if fn returns nil, makes the
// copy durable and current. Changes are serialized.
func (s *Store) Update(fn func(*Image) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.img.Clone()
	if err := fn(next); err != nil {
		return err
	}
	next.Offset++
	if err := s.persist(next); err != nil {
		return err
	}
	s.img = next
	for _, sub := range s.subs {
		sub(next)
	}
	return nil
}

func (s *Store) persist(img *Image) error {
	data, err := json.MarshalIndent(img, "", " ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(s.fs, path.Join(s.dir, fileName), data, true)
}
