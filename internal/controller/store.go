package controller

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// boltStore is the raft LogStore and StableStore on one bbolt file. bbolt
// fsyncs every write transaction before Update returns (NoSync stays false),
// so a log entry raft has been told is stored is on disk: the metadata log
// is always durable.
//
// It stands in for github.com/hashicorp/raft-boltdb/v2, whose latest release
// (v2.3.1) imports github.com/hashicorp/go-metrics/compat, a package that
// go-metrics v0.7.0 (required by raft v1.8.0) no longer has; the two do not
// build together. The format is this package's own: key = big-endian index,
// value = term, type, appendedAt, data length, data, extensions.
type boltStore struct {
	db *bolt.DB
}

var (
	bucketLogs   = []byte("logs")
	bucketStable = []byte("conf")
)

func openBoltStore(path string) (*boltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	// An existing store is not written to on open (a start refused
	// after opening it leaves the file as it was).
	var ready bool
	db.View(func(tx *bolt.Tx) error {
		ready = tx.Bucket(bucketLogs) != nil && tx.Bucket(bucketStable) != nil
		return nil
	})
	if ready {
		return &boltStore{db: db}, nil
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketLogs); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(bucketStable)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltStore{db: db}, nil
}

func (s *boltStore) Close() error { return s.db.Close() }

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// FirstIndex implements raft.LogStore.
func (s *boltStore) FirstIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLogs).Cursor().First(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// LastIndex implements raft.LogStore.
func (s *boltStore) LastIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLogs).Cursor().Last(); k != nil {
			idx = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return idx, err
}

// GetLog implements raft.LogStore.
func (s *boltStore) GetLog(index uint64, l *raft.Log) error {
	return s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLogs).Get(u64(index))
		if v == nil {
			return raft.ErrLogNotFound
		}
		return decodeLog(index, v, l)
	})
}

// StoreLog implements raft.LogStore.
func (s *boltStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: one fsynced transaction.
func (s *boltStore) StoreLogs(logs []*raft.Log) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketLogs)
		for _, l := range logs {
			if err := b.Put(u64(l.Index), encodeLog(l)); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteRange implements raft.LogStore.
func (s *boltStore) DeleteRange(lo, hi uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketLogs).Cursor()
		for k, _ := c.Seek(u64(lo)); k != nil; k, _ = c.Next() {
			if binary.BigEndian.Uint64(k) > hi {
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Set implements raft.StableStore.
func (s *boltStore) Set(k, v []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketStable).Put(k, v) })
}

// Get implements raft.StableStore; a missing key is an empty value.
func (s *boltStore) Get(k []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketStable).Get(k); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err == nil && out == nil {
		return nil, errors.New("not found")
	}
	return out, err
}

// SetUint64 implements raft.StableStore.
func (s *boltStore) SetUint64(k []byte, v uint64) error { return s.Set(k, u64(v)) }

// GetUint64 implements raft.StableStore.
func (s *boltStore) GetUint64(k []byte) (uint64, error) {
	v, err := s.Get(k)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, errors.New("controller: malformed stable value")
	}
	return binary.BigEndian.Uint64(v), nil
}

const logHeader = 8 + 1 + 8 + 4

func encodeLog(l *raft.Log) []byte {
	b := make([]byte, logHeader, logHeader+len(l.Data)+len(l.Extensions))
	binary.BigEndian.PutUint64(b[0:], l.Term)
	b[8] = byte(l.Type)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.BigEndian.PutUint64(b[9:], uint64(at))
	binary.BigEndian.PutUint32(b[17:], uint32(len(l.Data)))
	b = append(b, l.Data...)
	return append(b, l.Extensions...)
}

func decodeLog(index uint64, v []byte, l *raft.Log) error {
	if len(v) < logHeader {
		return errors.New("controller: corrupt raft log entry")
	}
	n := int(binary.BigEndian.Uint32(v[17:]))
	if len(v) < logHeader+n {
		return errors.New("controller: corrupt raft log entry")
	}
	*l = raft.Log{Index: index, Term: binary.BigEndian.Uint64(v[0:]), Type: raft.LogType(v[8])}
	if at := int64(binary.BigEndian.Uint64(v[9:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	l.Data = append([]byte(nil), v[logHeader:logHeader+n]...)
	if rest := v[logHeader+n:]; len(rest) > 0 {
		l.Extensions = append([]byte(nil), rest...)
	}
	return nil
}
