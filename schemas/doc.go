// Package schemas holds the contracts between ilb's services: the signal
// events engines publish and their protobuf wire codec (signal.proto), the
// weight snapshot and manifest served to data planes, the fleet file, the
// Arrow schemas of the feature and profile tables, and the default names
// of topics, bucket, keys and headers. It imports nothing of ilb's own.
//
// Every type has a Validate method; decoders validate what they return,
// never panic on bad input, and return errors wrapping one of the
// sentinels ErrMalformed, ErrInvalid, ErrUnsupportedVersion or
// ErrSchemaMismatch that say what was wrong. The formats and their
// versioning rules are documented in README.md next to this file.
//
// # Concurrency
//
// Values are plain data. The package-level functions are safe for
// concurrent use on distinct values. A Decoder keeps an intern table and
// is not: use one per goroutine. FeatureSchema and ProfileSchema are
// shared and must be treated as read-only. ExampleFleet returns a fresh
// copy on each call.
package schemas
