package schemas

import "errors"

// Sentinel errors. Every error returned by a decoder or a Validate method
// wraps exactly one of them, so callers can branch (for example, to pick a
// DLQ reason or a counter label) with errors.Is.
var (
	// ErrMalformed: the bytes are not a well-formed encoding (truncated
	// protobuf, bad JSON or YAML, wrong wire type for a known field).
	ErrMalformed = errors.New("malformed")
	// ErrInvalid: the value decoded but breaks a rule of its Validate.
	ErrInvalid = errors.New("invalid")
	// ErrUnsupportedVersion: a signal event written with a newer schema
	// version than this build understands.
	ErrUnsupportedVersion = errors.New("unsupported schema version")
	// ErrSchemaMismatch: an Arrow record whose schema is not the expected
	// table's (wrong version, missing column, wrong column type).
	ErrSchemaMismatch = errors.New("arrow schema mismatch")
)
