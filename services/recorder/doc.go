// Package recorder owns ilb's recordings of Kafka topics: Record consumes
// topics (ilb.signals by default) into an Arrow IPC file, one row per Kafka
// record with its topic, partition, offset, timestamp, key, value and
// headers; Replay produces a recording back into Kafka at its original
// pace, scaled, or as fast as possible, keeping keys, values, headers,
// timestamps and partitions. Signal events carry their own event time, so
// a replayed stream drives the aggregator and the optimizer as the live
// one did. README.md documents the file format.
//
// A recording is written batch by batch to its path plus
// arrowipc.PartialSuffix and renamed when the recorder stops, so a killed
// recorder loses at most the batch it was filling; Replay and
// ReadRecording read such a partial file when given its name. Any Arrow
// tool (pyarrow, DuckDB, arrow-go's ipc.FileReader) reads a finished one.
//
// # Concurrency
//
// Record and Replay each run on the calling goroutine and return when
// done; franz-go's goroutines end with their client before they return.
// Configs are plain values.
package recorder
