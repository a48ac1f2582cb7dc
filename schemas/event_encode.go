package schemas

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of signal.proto. They are the wire contract: never reuse
// or renumber one; add new fields with new numbers.
const (
	fieldEventVersion    protowire.Number = 1
	fieldEventStatus     protowire.Number = 2
	fieldEventCompletion protowire.Number = 3

	fieldStatusEngine        protowire.Number = 1
	fieldStatusTime          protowire.Number = 2
	fieldStatusHealth        protowire.Number = 3
	fieldStatusReady         protowire.Number = 4
	fieldStatusTotal         protowire.Number = 5
	fieldStatusRunning       protowire.Number = 6
	fieldStatusWaiting       protowire.Number = 7
	fieldStatusKVUtilization protowire.Number = 8

	fieldCompEngine         protowire.Number = 1
	fieldCompTime           protowire.Number = 2
	fieldCompConversationID protowire.Number = 3
	fieldCompCluster        protowire.Number = 4
	fieldCompPromptTokens   protowire.Number = 5
	fieldCompCachedTokens   protowire.Number = 6
	fieldCompOutputTokens   protowire.Number = 7
	fieldCompTTFT           protowire.Number = 8
	fieldCompTBOT           protowire.Number = 9
	fieldCompError          protowire.Number = 10
	fieldCompModel          protowire.Number = 11
)

// AppendEvent validates ev and appends its protobuf encoding (a
// SignalEvent, see signal.proto) to dst. Fields with zero values are
// omitted, as proto3 does, so the output is the canonical encoding other
// protobuf libraries produce. It does not allocate when dst has room. On
// error dst is returned unchanged.
func AppendEvent(dst []byte, ev *Event) ([]byte, error) {
	if err := ev.Validate(); err != nil {
		return dst, fmt.Errorf("schemas: encode event: %w", err)
	}
	dst = protowire.AppendTag(dst, fieldEventVersion, protowire.VarintType)
	dst = protowire.AppendVarint(dst, EventSchemaVersion)
	if ev.Kind == KindStatus {
		dst = protowire.AppendTag(dst, fieldEventStatus, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(sizeStatus(&ev.Status)))
		return appendStatus(dst, &ev.Status), nil
	}
	dst = protowire.AppendTag(dst, fieldEventCompletion, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(sizeCompletion(&ev.Completion)))
	return appendCompletion(dst, &ev.Completion), nil
}

// EncodedSize returns the length of AppendEvent's output for a valid ev,
// so callers can size buffers.
func EncodedSize(ev *Event) int {
	n := protowire.SizeTag(fieldEventVersion) + protowire.SizeVarint(EventSchemaVersion)
	if ev.Kind == KindStatus {
		return n + protowire.SizeTag(fieldEventStatus) + protowire.SizeBytes(sizeStatus(&ev.Status))
	}
	return n + protowire.SizeTag(fieldEventCompletion) + protowire.SizeBytes(sizeCompletion(&ev.Completion))
}

func appendStatus(b []byte, s *EngineStatus) []byte {
	b = appendString(b, fieldStatusEngine, s.Engine)
	b = appendSfixed64(b, fieldStatusTime, s.TimeUnixNano)
	b = appendUvarint(b, fieldStatusHealth, uint64(s.Health))
	b = appendUvarint(b, fieldStatusReady, uint64(s.ReadyReplicas))
	b = appendUvarint(b, fieldStatusTotal, uint64(s.TotalReplicas))
	b = appendUvarint(b, fieldStatusRunning, uint64(s.Running))
	b = appendUvarint(b, fieldStatusWaiting, uint64(s.Waiting))
	return appendDouble(b, fieldStatusKVUtilization, s.KVCacheUtilization)
}

func sizeStatus(s *EngineStatus) int {
	return sizeString(s.Engine) + sizeSfixed64(s.TimeUnixNano) +
		sizeUvarint(uint64(s.Health)) + sizeUvarint(uint64(s.ReadyReplicas)) +
		sizeUvarint(uint64(s.TotalReplicas)) + sizeUvarint(uint64(s.Running)) +
		sizeUvarint(uint64(s.Waiting)) + sizeDouble(s.KVCacheUtilization)
}

func appendCompletion(b []byte, c *Completion) []byte {
	b = appendString(b, fieldCompEngine, c.Engine)
	b = appendSfixed64(b, fieldCompTime, c.TimeUnixNano)
	b = appendString(b, fieldCompConversationID, c.ConversationID)
	b = appendString(b, fieldCompCluster, c.Cluster)
	b = appendUvarint(b, fieldCompPromptTokens, uint64(c.PromptTokens))
	b = appendUvarint(b, fieldCompCachedTokens, uint64(c.CachedPromptTokens))
	b = appendUvarint(b, fieldCompOutputTokens, uint64(c.OutputTokens))
	b = appendDouble(b, fieldCompTTFT, c.TTFTMs)
	b = appendDouble(b, fieldCompTBOT, c.TBOTMs)
	b = appendString(b, fieldCompError, c.Error)
	return appendString(b, fieldCompModel, c.Model)
}

func sizeCompletion(c *Completion) int {
	return sizeString(c.Engine) + sizeSfixed64(c.TimeUnixNano) +
		sizeString(c.ConversationID) + sizeString(c.Cluster) +
		sizeUvarint(uint64(c.PromptTokens)) + sizeUvarint(uint64(c.CachedPromptTokens)) +
		sizeUvarint(uint64(c.OutputTokens)) + sizeDouble(c.TTFTMs) +
		sizeDouble(c.TBOTMs) + sizeString(c.Error) + sizeString(c.Model)
}

// The helpers below skip zero values (proto3 implicit presence). All field
// numbers here are below 16, so every tag is one byte.

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func sizeString(s string) int {
	if s == "" {
		return 0
	}
	return 1 + protowire.SizeBytes(len(s))
}

func appendUvarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func sizeUvarint(v uint64) int {
	if v == 0 {
		return 0
	}
	return 1 + protowire.SizeVarint(v)
}

func appendSfixed64(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, uint64(v))
}

func sizeSfixed64(v int64) int {
	if v == 0 {
		return 0
	}
	return 9
}

// appendDouble omits +0 only; -0 has a non-zero bit pattern and is kept,
// as protobuf-go does, so it survives a round trip.
func appendDouble(b []byte, num protowire.Number, v float64) []byte {
	bits := math.Float64bits(v)
	if bits == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, bits)
}

func sizeDouble(v float64) int {
	if math.Float64bits(v) == 0 {
		return 0
	}
	return 9
}
