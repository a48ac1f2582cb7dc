// Package window owns ilb's event-time windowing: it assigns signal events
// to tumbling or hopping windows, decides when a window is complete, emits
// each window exactly once, and keeps enough bookkeeping that an
// at-least-once source (Kafka) and a restart never double count. It is the
// computational core of the signal path, run by the aggregator service and
// by the backtester's optimizer policy alike.
//
// Windower[A] is generic over the per-key accumulator; Features is the
// Windower ilb runs, turning schemas.Event values into schemas.Feature rows
// (counts, error rate, cache hit ratio, TTFT and TBOT quantiles from a
// Sketch, in-flight, utilisation, KV use, health).
//
// # Windows, watermark, lateness
//
// Window k covers event times [k*Hop, k*Hop+Size); an event belongs to
// Size/Hop windows. The watermark is the largest event time seen minus
// Config.OutOfOrder (or a later time given to AdvanceWatermark). A window
// closes once watermark >= end + Config.AllowedLateness; Drain then emits
// it, oldest first and keys sorted, exactly once. An event for a window
// that has closed is not applied to it; the event is counted as late (once,
// even when it missed several hopping windows) in the oldest window still
// open, under its own key, so the count reaches the output (Entry.Late,
// Feature.LateEvents) and is never silently lost. Memory is bounded by the
// open windows times their keys, never by the number of events.
//
// # Offsets, restarts and replays
//
// Each event comes with its source Position (partition, offset). For each
// partition the Windower tracks the last offset processed, and each window
// the smallest offset of every partition that contributed to it (an
// applied event or a late count). From these:
//
//   - Duplicates: an offset at or below the last processed one is skipped
//     and counted (Stats.Duplicates), so a consumer that re-reads after a
//     rebalance does not count an event twice.
//   - Commits: the offset a consumer may commit for a partition is the
//     smallest offset still held by a window not yet emitted (or, with none,
//     the last processed + 1). Committing it after the emitted rows are
//     durably published means a restart re-reads every event an unemitted
//     window needs, and nothing older.
//   - Checkpoint: with the commits the service stores a small Checkpoint
//     (watermark, closed and emitted frontiers, and a log of when windows
//     closed relative to each partition's progress). Restore loads it into a
//     new Windower before the first event.
//
// After Restore, events from a partition's commit through its last
// processed offset are replays. Because offsets within a partition are
// processed in order, the step log tells exactly which windows were closed
// when a replayed event was first processed, whatever the interleaving of
// partitions. A replayed event is therefore applied to exactly the windows
// it went to before, minus those already emitted (skipped and counted in
// Stats.Replayed), and its late count is redone only if it went to a window
// not yet emitted. Emission waits until every partition's replay has
// arrived (Replaying, EndReplay), so that no window is emitted without the
// replayed events it needs, while new events are still classified against
// the restored watermark. Hence a restart or a replayed stretch never
// double counts a window: the rows after a restart are those of a run
// without the crash that read the not-yet-processed events in the same
// order (the watermark depends on that order; the re-read events may
// interleave freely), and a window that was emitted before the crash but
// after the stored checkpoint is emitted again with identical content and
// identity (Entry.ID, or window bounds + engine + cluster of a row) for the
// downstream to drop. restart_test.go checks this at crash points throughout
// streams with late, duplicate and re-ordered events, and across two
// crashes in a row.
//
// A service stopping for a restart should not Flush: Flush emits windows
// still open, which is right only at the end of a bounded stream.
//
// # Concurrency
//
// A Windower (and Features) is not safe for concurrent use: one goroutine
// owns it, and services run one per consumer. The package has no
// goroutines, no clock, no I/O and no mutable globals; time is the
// events' own, or passed to AdvanceWatermark. A Sketch is plain data.
package window
