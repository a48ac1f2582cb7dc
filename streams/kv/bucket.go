package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ilb-router/ilb/schemas"
)

// Sentinel errors callers branch on.
var (
	// ErrRevisionConflict: the key's revision was not the expected one
	// (another writer got there first, or the key exists when it was
	// expected not to). Re-read and decide again.
	ErrRevisionConflict = errors.New("kv: revision conflict")
	// ErrNotFound: the key does not exist (or was deleted).
	ErrNotFound = errors.New("kv: key not found")
)

// BucketConfig describes a KV bucket.
type BucketConfig struct {
	Name        string
	Description string
	// History is how many revisions per key are kept (1..64), so an
	// operator can roll back.
	History uint8
	// Replicas is the JetStream replication factor (1..5).
	Replicas int
	// Storage is file (survives restarts) or memory.
	Storage jetstream.StorageType
	// MaxValueBytes bounds one value; 0 means the server's limit.
	MaxValueBytes int32
}

// DefaultBucketConfig returns a file-backed bucket keeping 64 revisions
// per key.
func DefaultBucketConfig(name string) BucketConfig {
	return BucketConfig{Name: name, History: jetstream.KeyValueMaxHistory, Replicas: 1, Storage: jetstream.FileStorage}
}

// Validate reports the first problem with c.
func (c BucketConfig) Validate() error {
	if err := schemas.ValidBucketName(c.Name); err != nil {
		return fmt.Errorf("kv: %w", err)
	}
	switch {
	case c.History < 1 || c.History > jetstream.KeyValueMaxHistory:
		return fmt.Errorf("kv: history %d out of range [1, %d]", c.History, jetstream.KeyValueMaxHistory)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("kv: replicas %d out of range [1, 5]", c.Replicas)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return fmt.Errorf("kv: unknown storage %v", c.Storage)
	case c.MaxValueBytes < 0:
		return fmt.Errorf("kv: max value bytes %d is negative", c.MaxValueBytes)
	}
	return nil
}

// EnsureBucket creates the bucket, or updates an existing one to cfg, and
// returns it.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, cfg BucketConfig) (jetstream.KeyValue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       cfg.Name,
		Description:  cfg.Description,
		History:      cfg.History,
		Replicas:     cfg.Replicas,
		Storage:      cfg.Storage,
		MaxValueSize: cfg.MaxValueBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("kv: ensure bucket %s: %w", cfg.Name, refused(js.Conn(), err, "KV_"+cfg.Name+`"`))
	}
	return kv, nil
}

// Put writes value under key only if the key is at expectRevision: 0
// means the key must not exist (or be deleted). It returns the new
// revision, or ErrRevisionConflict when another write came first.
func Put(ctx context.Context, kv jetstream.KeyValue, key string, value []byte, expectRevision uint64) (uint64, error) {
	var (
		rev uint64
		err error
	)
	if expectRevision == 0 {
		rev, err = kv.Create(ctx, key, value)
	} else {
		rev, err = kv.Update(ctx, key, value, expectRevision)
	}
	switch {
	case err == nil:
		return rev, nil
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return 0, fmt.Errorf("%w: %s/%s expected revision %d: %v", ErrRevisionConflict, kv.Bucket(), key, expectRevision, err)
	}
	subject := `"$KV.` + kv.Bucket() + "." + key + `"`
	return 0, fmt.Errorf("kv: put %s/%s: %w", kv.Bucket(), key, refused(connOf(kv), err, subject))
}

// Op says how an entry came to be.
type Op uint8

// Entry operations.
const (
	OpPut    Op = iota // a value was written
	OpDelete           // the key was deleted (Value is empty)
	OpPurge            // the key and its history were purged (Value is empty)
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpPurge:
		return "purge"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Entry is one revision of a key.
type Entry struct {
	Key      string
	Value    []byte
	Revision uint64 // bucket-wide sequence, increasing with every write
	Created  time.Time
	Op       Op
}

func toEntry(e jetstream.KeyValueEntry) Entry {
	op := OpPut
	switch e.Operation() {
	case jetstream.KeyValueDelete:
		op = OpDelete
	case jetstream.KeyValuePurge:
		op = OpPurge
	}
	return Entry{Key: e.Key(), Value: e.Value(), Revision: e.Revision(), Created: e.Created(), Op: op}
}

// Get returns the latest entry of key, or ErrNotFound.
func Get(ctx context.Context, kv jetstream.KeyValue, key string) (Entry, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Entry{}, fmt.Errorf("%w: %s/%s", ErrNotFound, kv.Bucket(), key)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("kv: get %s/%s: %w", kv.Bucket(), key, err)
	}
	return toEntry(e), nil
}

// History returns the kept revisions of key, oldest first, deletes
// included; ErrNotFound when there are none.
func History(ctx context.Context, kv jetstream.KeyValue, key string) ([]Entry, error) {
	es, err := kv.History(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, kv.Bucket(), key)
	}
	if err != nil {
		return nil, fmt.Errorf("kv: history %s/%s: %w", kv.Bucket(), key, err)
	}
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = toEntry(e)
	}
	return out, nil
}
