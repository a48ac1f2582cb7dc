package optimizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/ilb-router/ilb/schemas"
	"github.com/ilb-router/ilb/streams/kv"
)

// ErrConflict: another publisher claimed the next version first (the
// manifest's compare-and-swap failed). Nothing was written; reload the
// latest snapshots and decide again.
var ErrConflict = errors.New("optimizer: publish conflict: another publisher claimed the version")

// ErrNotInHistory: a rollback asked for a version the bucket no longer
// (or never) held.
var ErrNotInHistory = errors.New("optimizer: version not in the snapshot history")

// maxKeyRetries bounds compare-and-swap retries on one cluster key. Each
// conflict means another publisher wrote the key meanwhile with a version
// below ours (a later one ends the loop), so retries are bounded by the
// publishes racing this one; 16 is far above any sane number of them.
const maxKeyRetries = 16

// kvOperationHeader is the header JetStream KV puts on delete and purge
// markers.
const kvOperationHeader = "KV-Operation"

// EnsureWeightsBucket opens the weights bucket, creating it when it does
// not exist as the optimizer needs it: file storage, the maximum history
// (64 revisions per key, for `ilb weights history` and rollbacks),
// replicas as given (3 in production, README.md). An existing bucket is
// used as it is: an operator's settings (replicas, placement) are never
// changed by a starting optimizer.
func EnsureWeightsBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (jetstream.KeyValue, error) {
	b, err := js.KeyValue(ctx, bucket)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("optimizer: open bucket %s: %w", bucket, err)
	}
	cfg := kv.DefaultBucketConfig(bucket)
	cfg.Replicas = replicas
	cfg.Description = "ilb weight snapshots: one key per front-end cluster, plus manifest"
	return kv.EnsureBucket(ctx, js, cfg)
}

// Publisher writes weight snapshots to the weights bucket with the
// manifest protocol (README.md, Publishing): it claims version v =
// manifest.version + 1 by a compare-and-swap on the manifest's last
// revision, then writes each cluster's snapshot at v with a
// compare-and-swap on that key's last revision, never over a snapshot of
// version v or later. Two publishers therefore never write the same
// version, and no key's version ever decreases. Messages carry the trace
// context of the ctx they are published with in their NATS headers.
//
// A Publisher is safe for concurrent use; the protocol, not a lock, keeps
// concurrent publishes consistent.
type Publisher struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	bucket string
	id     string
	now    func() time.Time
	prop   propagation.TextMapPropagator

	// mu guards the revisions of this publisher's own last writes. A
	// compare-and-swap expecting one of them saves reading the key first,
	// and is as safe: it succeeds only if nobody wrote since.
	mu       sync.Mutex
	written  map[string]uint64 // key -> revision of our last write
	manifest *schemas.Manifest // our last manifest, at written[ManifestKey]
}

// PublisherConfig configures NewPublisher.
type PublisherConfig struct {
	Bucket     string
	ID         string                        // written as the manifest's leader
	Now        func() time.Time              // nil: time.Now
	Propagator propagation.TextMapPropagator // nil: otel's global propagator
}

// NewPublisher opens the (existing) weights bucket.
func NewPublisher(ctx context.Context, js jetstream.JetStream, cfg PublisherConfig) (*Publisher, error) {
	if err := schemas.ValidBucketName(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("optimizer: publisher: %w", err)
	}
	b, err := js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("optimizer: open bucket %s: %w", cfg.Bucket, err)
	}
	st, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("optimizer: open stream of bucket %s: %w", cfg.Bucket, err)
	}
	p := &Publisher{js: js, stream: st, kv: b, bucket: cfg.Bucket, id: cfg.ID, now: cfg.Now, prop: cfg.Propagator,
		written: map[string]uint64{}}
	if p.now == nil {
		p.now = time.Now
	}
	if p.prop == nil {
		p.prop = otel.GetTextMapPropagator()
	}
	return p, nil
}

// Bucket returns the bucket's KV handle.
func (p *Publisher) Bucket() jetstream.KeyValue { return p.kv }

// Result says what a publish did.
type Result struct {
	Version uint64
	// Written are the clusters whose key now holds the new version;
	// Superseded those skipped because a later version got there first.
	Written, Superseded []string
	// CreatedAt is the snapshots' created_at: when the publish started.
	CreatedAt time.Time
	// ManifestRevision is the revision of the manifest this publish wrote.
	ManifestRevision uint64
}

// rawEntry is the last message on a key, delete markers included.
type rawEntry struct {
	seq     uint64 // 0: the key never existed (or was purged away)
	data    []byte
	deleted bool
	created time.Time
}

func (p *Publisher) subject(key string) string { return "$KV." + p.bucket + "." + key }

// latest reads the last message of key, so a compare-and-swap can expect
// its sequence even when it is a delete marker.
func (p *Publisher) latest(ctx context.Context, key string) (rawEntry, error) {
	m, err := p.stream.GetLastMsgForSubject(ctx, p.subject(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return rawEntry{}, nil
	}
	if err != nil {
		return rawEntry{}, fmt.Errorf("optimizer: read %s/%s: %w", p.bucket, key, err)
	}
	op := m.Header.Get(kvOperationHeader)
	return rawEntry{seq: m.Sequence, data: m.Data, deleted: op == "DEL" || op == "PURGE", created: m.Time}, nil
}

// Manifest returns the current manifest and its revision; nil and 0 when
// there is none yet.
func (p *Publisher) Manifest(ctx context.Context) (*schemas.Manifest, uint64, error) {
	e, err := p.latest(ctx, schemas.ManifestKey)
	if err != nil || e.seq == 0 || e.deleted {
		return nil, e.seq, err
	}
	m, err := schemas.DecodeManifest(e.data)
	if err != nil {
		return nil, e.seq, fmt.Errorf("optimizer: manifest at revision %d: %w", e.seq, err)
	}
	return m, e.seq, nil
}

// message builds the KV message for key with ctx's trace context in its
// headers.
func (p *Publisher) message(ctx context.Context, key string, value []byte) *nats.Msg {
	m := &nats.Msg{Subject: p.subject(key), Data: value, Header: nats.Header{}}
	p.prop.Inject(ctx, kv.HeaderCarrier(m.Header))
	return m
}

// isCASConflict reports a "wrong last sequence" answer (code 10071, or
// 10164 on replicated streams).
func isCASConflict(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// put writes value under key if the key's last message is expect (0: the
// key has none). It returns kv.ErrRevisionConflict when it is not.
func (p *Publisher) put(ctx context.Context, key string, value []byte, expect uint64) (uint64, error) {
	ack, err := p.js.PublishMsg(ctx, p.message(ctx, key, value), jetstream.WithExpectLastSequencePerSubject(expect))
	if isCASConflict(err) {
		return 0, fmt.Errorf("%w: %s/%s expected revision %d", kv.ErrRevisionConflict, p.bucket, key, expect)
	}
	if err != nil {
		return 0, fmt.Errorf("optimizer: write %s/%s: %w", p.bucket, key, err)
	}
	return ack.Sequence, nil
}

// Publish publishes snaps (one per cluster) as the next fleet-wide
// version. It sets each snapshot's Version and CreatedAt; the caller's
// values are not modified. ErrConflict means another publisher claimed the
// version first and nothing was written.
func (p *Publisher) Publish(ctx context.Context, snaps []*schemas.Snapshot) (Result, error) {
	if len(snaps) == 0 {
		return Result{}, errors.New("optimizer: publish: no snapshot")
	}
	old, rev, err := p.lastManifest(ctx)
	if err != nil {
		return Result{}, err
	}
	res := Result{Version: 1, CreatedAt: p.now().UTC()}
	man := &schemas.Manifest{CreatedAt: res.CreatedAt, Clusters: map[string]uint64{}, Leader: p.id}
	if old != nil {
		res.Version = old.Version + 1
		maps.Copy(man.Clusters, old.Clusters)
	}
	man.Version = res.Version
	values, err := p.encodeAll(ctx, snaps, res, man)
	if err != nil {
		return Result{}, err
	}
	mb, err := schemas.EncodeManifest(man)
	if err != nil {
		return Result{}, fmt.Errorf("optimizer: publish v%d: %w", res.Version, err)
	}
	if res.ManifestRevision, err = p.put(ctx, schemas.ManifestKey, mb, rev); err != nil {
		p.remember(schemas.ManifestKey, 0, nil)
		if errors.Is(err, kv.ErrRevisionConflict) {
			return Result{}, fmt.Errorf("%w (manifest revision %d moved)", ErrConflict, rev)
		}
		return Result{}, fmt.Errorf("optimizer: publish v%d: claim: %w", res.Version, err)
	}
	p.remember(schemas.ManifestKey, res.ManifestRevision, man)
	return p.writeClusters(ctx, res, values)
}

// lastManifest returns the manifest this publisher wrote last, without a
// read, or else the bucket's.
func (p *Publisher) lastManifest(ctx context.Context) (*schemas.Manifest, uint64, error) {
	p.mu.Lock()
	m, rev := p.manifest, p.written[schemas.ManifestKey]
	p.mu.Unlock()
	if rev != 0 && m != nil {
		return m, rev, nil
	}
	return p.Manifest(ctx)
}

// remember records our write of key at rev (0 forgets it).
func (p *Publisher) remember(key string, rev uint64, m *schemas.Manifest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rev == 0 {
		delete(p.written, key)
	} else {
		p.written[key] = rev
	}
	if key == schemas.ManifestKey {
		p.manifest = m
	}
}

func (p *Publisher) lastWritten(key string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.written[key]
}

// encodeAll encodes each snapshot at the new version and records it in
// the manifest.
func (p *Publisher) encodeAll(ctx context.Context, snaps []*schemas.Snapshot, res Result, man *schemas.Manifest) (map[string][]byte, error) {
	values := make(map[string][]byte, len(snaps))
	tp := traceparent(ctx, p.prop)
	for _, s := range snaps {
		c := *s
		c.Version, c.CreatedAt = res.Version, res.CreatedAt
		if _, dup := values[c.Cluster]; dup {
			return nil, fmt.Errorf("optimizer: publish: cluster %q twice", c.Cluster)
		}
		b, err := encodeSnapshot(&c, tp)
		if err != nil {
			return nil, fmt.Errorf("optimizer: publish v%d: %w", res.Version, err)
		}
		values[c.Cluster] = b
		man.Clusters[c.Cluster] = res.Version
	}
	return values, nil
}

// encodeSnapshot is schemas.EncodeSnapshot plus, when tp is set, a
// "traceparent" field (W3C trace context of the publish): KV watchers
// cannot see message headers, and schemas readers ignore unknown fields.
func encodeSnapshot(s *schemas.Snapshot, tp string) ([]byte, error) {
	b, err := schemas.EncodeSnapshot(s)
	if err != nil || tp == "" {
		return b, err
	}
	q, err := json.Marshal(tp)
	if err != nil {
		return nil, err
	}
	out := append(b[:len(b)-1:len(b)-1], `,"traceparent":`...)
	return append(append(out, q...), '}'), nil
}

func traceparent(ctx context.Context, prop propagation.TextMapPropagator) string {
	c := propagation.MapCarrier{}
	prop.Inject(ctx, c)
	return c["traceparent"]
}

// writeClusters writes every cluster's snapshot concurrently (one
// round trip for all of them), each with a compare-and-swap on its key.
func (p *Publisher) writeClusters(ctx context.Context, res Result, values map[string][]byte) (Result, error) {
	type outcome struct {
		cluster    string
		superseded bool
		err        error
	}
	clusters := sortedKeys(values)
	done := make(chan outcome, len(clusters))
	for _, c := range clusters {
		go func() {
			sup, err := p.writeCluster(ctx, c, values[c], res.Version)
			done <- outcome{c, sup, err}
		}()
	}
	var errs []error
	for range clusters {
		o := <-done
		switch {
		case o.err != nil:
			errs = append(errs, o.err)
		case o.superseded:
			res.Superseded = append(res.Superseded, o.cluster)
		default:
			res.Written = append(res.Written, o.cluster)
		}
	}
	slices.Sort(res.Written)
	slices.Sort(res.Superseded)
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("optimizer: publish v%d: %w", res.Version, err)
	}
	return res, nil
}

// writeCluster writes one snapshot at version v unless the key already
// holds v or later (then it reports superseded).
func (p *Publisher) writeCluster(ctx context.Context, cluster string, value []byte, v uint64) (superseded bool, err error) {
	if rev := p.lastWritten(cluster); rev != 0 {
		// Nobody wrote since our last write (which was older than v) if
		// this succeeds; otherwise read and decide.
		next, err := p.put(ctx, cluster, value, rev)
		if err == nil {
			p.remember(cluster, next, nil)
			return false, nil
		}
		p.remember(cluster, 0, nil)
		if !errors.Is(err, kv.ErrRevisionConflict) {
			return false, err
		}
	}
	for range maxKeyRetries {
		cur, err := p.latest(ctx, cluster)
		if err != nil {
			return false, err
		}
		if !cur.deleted && cur.seq != 0 && versionOf(cur.data) >= v {
			return true, nil
		}
		next, err := p.put(ctx, cluster, value, cur.seq)
		if err == nil {
			p.remember(cluster, next, nil)
		}
		if !errors.Is(err, kv.ErrRevisionConflict) {
			return false, err
		}
	}
	return false, fmt.Errorf("optimizer: write %s/%s: still conflicting after %d attempts", p.bucket, cluster, maxKeyRetries)
}

// versionOf returns the version field of a stored value (0 when it is not
// a snapshot: a hand-written value may be overwritten).
func versionOf(data []byte) uint64 {
	var v struct {
		Version uint64 `json:"version"`
	}
	if json.Unmarshal(data, &v) != nil {
		return 0
	}
	return v.Version
}
