package schemas

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Default names of the Kafka topics and the JetStream KV bucket. Services
// take them from flags; these are the defaults and what the docs use.
const (
	TopicSignals    = "ilb.signals"     // signal events, keyed by engine name
	TopicSignalsDLQ = "ilb.signals.dlq" // events that failed decoding or validation
	TopicFeatures   = "ilb.features"    // Arrow IPC record batches of windowed features
	TopicProfiles   = "ilb.profiles"    // Arrow IPC profile tables, key "profiles"
	BucketWeights   = "ilb-weights"     // one key per front-end cluster, plus ManifestKey
	ManifestKey     = "manifest"        // key of the fleet-wide Manifest in BucketWeights
)

// Kafka record headers.
const (
	// HeaderSchema names the format of a record's value, e.g. SchemaSignalV1.
	// Consumers route records whose schema they do not know to the DLQ
	// instead of guessing.
	HeaderSchema = "ilb-schema"
	// HeaderDLQReason carries, on a DLQ record, why the original record was
	// rejected (the decode or validation error text).
	HeaderDLQReason = "ilb-dlq-reason"
	// HeaderAsOf carries, on an ilb.profiles record, the event time (unix
	// nanoseconds, decimal) of the feature windows the fit saw: the
	// optimizer's event clock uses a fit from the window after it.
	HeaderAsOf = "ilb-as-of"
	// HeaderWindow on an ilb.features record names the window and the
	// signals partition it comes from: "PARTITION/START_NS/END_NS". The
	// record's key is the partition, so one partition's windows arrive in
	// order.
	HeaderWindow = "ilb-window"
	// HeaderProfilesAsOf on an ilb.features record is the as-of time
	// (unix ns, decimal) of the latest profiles record the aggregator had
	// published on ilb.profiles when it emitted the record, or queued with
	// it. A reader that needs every fit up to some time knows from it which
	// one to wait for.
	HeaderProfilesAsOf = "ilb-profiles-as-of"
)

// Values of HeaderSchema and of the Arrow schema metadata key
// SchemaMetadataKey.
const (
	SchemaSignalV1       = "signal/v1"   // protobuf SignalEvent, EventSchemaVersion 1
	FeatureSchemaVersion = "features/v1" // Arrow feature table
	ProfileSchemaVersion = "profiles/v1" // Arrow profile table
)

// MaxNameLen bounds engine and cluster names (bytes). Names end up in
// metric labels, KV keys and JSON maps; a bound keeps a bad producer from
// bloating all of them.
const MaxNameLen = 256

// ValidClusterName reports whether name can be a front-end cluster name.
// Cluster names are keys in the weights bucket, so they follow the NATS KV
// key rules ([-/_=.a-zA-Z0-9]+, not starting or ending with '.', no empty
// token ".."), are at most MaxNameLen bytes, and may not be ManifestKey.
func ValidClusterName(name string) error {
	switch {
	case name == "":
		return errors.New("cluster name is empty")
	case len(name) > MaxNameLen:
		return fmt.Errorf("cluster name is %d bytes, max %d", len(name), MaxNameLen)
	case name == ManifestKey:
		return fmt.Errorf("cluster name %q is reserved for the manifest", name)
	}
	return validKVKey(name)
}

// ClusterKey returns the key of cluster's snapshot in the weights bucket.
// It is the cluster name itself, checked with ValidClusterName.
func ClusterKey(cluster string) (string, error) {
	if err := ValidClusterName(cluster); err != nil {
		return "", fmt.Errorf("schemas: cluster key: %w", err)
	}
	return cluster, nil
}

func validKVKey(key string) error {
	if key[0] == '.' || key[len(key)-1] == '.' {
		return fmt.Errorf("%q starts or ends with '.'", key)
	}
	if strings.Contains(key, "..") {
		return fmt.Errorf("%q contains an empty token (\"..\")", key)
	}
	if r, bad := firstRuneNotIn(key, ""); bad {
		return fmt.Errorf("%q contains %q; allowed are [-/_=.a-zA-Z0-9]", key, r)
	}
	return nil
}

// firstRuneNotIn returns the first rune of s that is not a KV key
// character or is one of except (ASCII). It scans bytes against a table:
// every completion's cluster name passes through here on the hot path.
func firstRuneNotIn(s, except string) (rune, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !kvKeyChars[c] || (except != "" && strings.IndexByte(except, c) >= 0) {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return r, true
		}
	}
	return 0, false
}

// kvKeyChars marks the bytes allowed in a NATS KV key: [-/_=.a-zA-Z0-9].
var kvKeyChars = func() (t [256]bool) {
	for c := range 256 {
		t[c] = kvKeyByte(byte(c))
	}
	return t
}()

// ValidBucketName reports whether name is a valid JetStream KV bucket name
// ([a-zA-Z0-9_-]+).
func ValidBucketName(name string) error {
	if name == "" {
		return errors.New("bucket name is empty")
	}
	if r, bad := firstRuneNotIn(name, "./="); bad {
		return fmt.Errorf("bucket name %q contains %q; allowed are [a-zA-Z0-9_-]", name, r)
	}
	return nil
}

// ValidTopicName reports whether name is a legal Kafka topic name: 1 to
// 249 characters from [a-zA-Z0-9._-], and not "." or "..".
func ValidTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case len(name) > 249:
		return fmt.Errorf("topic name is %d bytes, max 249", len(name))
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	}
	if r, bad := firstRuneNotIn(name, "/="); bad {
		return fmt.Errorf("topic name %q contains %q; allowed are [a-zA-Z0-9._-]", name, r)
	}
	return nil
}

func kvKeyByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '/', '_', '=', '.':
		return true
	}
	return false
}

// WindowID is the value of HeaderWindow: the signals partition and the
// window of an ilb.features record.
type WindowID struct {
	Partition  int32
	Start, End int64 // unix ns
}

// String formats id as HeaderWindow carries it: "PARTITION/START_NS/END_NS".
func (id WindowID) String() string {
	return fmt.Sprintf("%d/%d/%d", id.Partition, id.Start, id.End)
}

// ParseWindowID reads a HeaderWindow value.
func ParseWindowID(s string) (WindowID, error) {
	p, rest, ok1 := strings.Cut(s, "/")
	start, end, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 {
		return WindowID{}, fmt.Errorf("window id %q: want PARTITION/START_NS/END_NS", s)
	}
	part, err1 := strconv.ParseInt(p, 10, 32)
	st, err2 := strconv.ParseInt(start, 10, 64)
	en, err3 := strconv.ParseInt(end, 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || part < 0 {
		return WindowID{}, fmt.Errorf("window id %q: want PARTITION/START_NS/END_NS", s)
	}
	return WindowID{Partition: int32(part), Start: st, End: en}, nil
}
