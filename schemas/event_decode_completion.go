package schemas

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

func decodeCompletion(b []byte, c *Completion, ns *nameSource) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var err error
		switch {
		case typ == protowire.BytesType && isCompletionString(num):
			var v []byte
			if v, n = protowire.ConsumeBytes(b); n >= 0 {
				c.setString(num, v, ns)
			}
		case typ == protowire.Fixed64Type && num == fieldCompTime:
			var v uint64
			v, n = protowire.ConsumeFixed64(b)
			c.TimeUnixNano = int64(v)
		case typ == protowire.Fixed64Type && (num == fieldCompTTFT || num == fieldCompTBOT):
			var v uint64
			if v, n = protowire.ConsumeFixed64(b); n >= 0 {
				*c.float64Field(num) = math.Float64frombits(v)
			}
		case typ == protowire.VarintType && num >= fieldCompPromptTokens && num <= fieldCompOutputTokens:
			n, err = consumeUint32(b, c.uint32Field(num))
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if err != nil {
			return err
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}

func isCompletionString(num protowire.Number) bool {
	switch num {
	case fieldCompEngine, fieldCompConversationID, fieldCompCluster, fieldCompError, fieldCompModel:
		return true
	}
	return false
}

func (c *Completion) setString(num protowire.Number, v []byte, ns *nameSource) {
	switch num {
	case fieldCompEngine:
		c.Engine = ns.name(v, ns.engine)
	case fieldCompCluster:
		c.Cluster = ns.name(v, ns.cluster)
	case fieldCompModel:
		c.Model = ns.name(v, ns.model)
	case fieldCompConversationID:
		// Conversation ids are too many to intern; reuse only an exact
		// repeat of the previous one.
		c.ConversationID = (&nameSource{}).name(v, ns.converstn)
	default:
		c.Error = string(v)
	}
}

func (c *Completion) float64Field(num protowire.Number) *float64 {
	if num == fieldCompTTFT {
		return &c.TTFTMs
	}
	return &c.TBOTMs
}

func (c *Completion) uint32Field(num protowire.Number) *uint32 {
	switch num {
	case fieldCompPromptTokens:
		return &c.PromptTokens
	case fieldCompCachedTokens:
		return &c.CachedPromptTokens
	}
	return &c.OutputTokens
}
