package aggregator

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/ilb-router/ilb/streams/window"
)

// checkpointPrefix starts the commit metadata that carries a partition's
// window checkpoint; metadata without it (franz-go writes the member id)
// carries none.
const checkpointPrefix = "ilb-agg/1:"

// errNoCheckpoint: the commit metadata carries no checkpoint.
var errNoCheckpoint = errors.New("no window checkpoint in the commit metadata")

// encodeCheckpoint returns the commit metadata for cp.
func encodeCheckpoint(cp window.Checkpoint) (string, error) {
	b, err := cp.MarshalBinary()
	if err != nil {
		return "", fmt.Errorf("aggregator: encode checkpoint: %w", err)
	}
	return checkpointPrefix + base64.RawStdEncoding.EncodeToString(b), nil
}

// decodeCheckpoint parses commit metadata. It returns errNoCheckpoint for
// metadata of another writer, and a wrapped window.ErrCheckpoint (or a
// base64 error) for a damaged checkpoint.
func decodeCheckpoint(meta string) (window.Checkpoint, error) {
	rest, ok := strings.CutPrefix(meta, checkpointPrefix)
	if !ok {
		return window.Checkpoint{}, errNoCheckpoint
	}
	b, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil {
		return window.Checkpoint{}, fmt.Errorf("%w: %w", window.ErrCheckpoint, err)
	}
	var cp window.Checkpoint
	if err := cp.UnmarshalBinary(b); err != nil {
		return window.Checkpoint{}, err
	}
	return cp, nil
}

// checkOwnCheckpoint checks that cp belongs to partition p committed at
// offset commit: a checkpoint of a single partition whose commit is the
// committed offset (an operator who reset the offsets makes it stale).
func checkOwnCheckpoint(cp window.Checkpoint, p int32, commit int64) error {
	switch {
	case len(cp.Partitions) > 1:
		return fmt.Errorf("%w: %d partitions, want 1", window.ErrCheckpoint, len(cp.Partitions))
	case len(cp.Partitions) == 1 && cp.Partitions[0].Partition != p:
		return fmt.Errorf("%w: checkpoint of partition %d on partition %d", window.ErrCheckpoint, cp.Partitions[0].Partition, p)
	case len(cp.Partitions) == 1 && cp.Partitions[0].Commit != commit:
		return fmt.Errorf("%w: checkpoint at offset %d, committed offset %d", window.ErrCheckpoint, cp.Partitions[0].Commit, commit)
	}
	return nil
}
