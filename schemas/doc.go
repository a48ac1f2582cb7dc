// Package schemas holds the contracts between ilb's services: the signal
// events engines publish and their binary wire codec, the weight snapshot
// served to data planes, the fleet file, and the Arrow schemas of the
// feature and profile tables. It imports nothing of ilb's own.
//
// Every type has a Validate method; decoders never panic on bad input and
// return errors that say what was wrong. The formats are documented in
// README.md next to this file.
//
// # Concurrency
//
// Values are plain data. Encoders and decoders are safe for concurrent use
// on distinct values.
package schemas
