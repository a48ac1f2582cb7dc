package backtest

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
)

// lmbenchParser reads the per-request logs of LMCache's LMBenchmark as
// llm-d-benchmark publishes them (LMBench_sharegpt_output_<qps>.csv,
// LMBench_short_input_qps<qps>.csv): a header naming prompt_tokens,
// generation_tokens, ttft, generation_time, launch_time and finish_time,
// plus user_id and question_id in the multi-round runs, then one request
// per line. Columns are found by name, in any order; prompt_tokens,
// generation_tokens and launch_time are required.
//
// A request arrives at launch_time (Unix seconds). Token counts may be
// written as floats ("76.0") but must be whole. The measured ttft,
// generation_time and finish_time are not part of a request and are
// ignored. In a multi-round run, user_id is the conversation, and since
// each turn's prompt is the conversation so far, turn after turn, the
// reader gives the prompt prefix blocks of lmbenchBlockTokens tokens
// named by (user, index): two turns of one user share the blocks their
// shorter prompt fills. Single-round logs (sharegpt) have no blocks.
type lmbenchParser struct {
	header bool
	col    lmbenchColumns
}

// lmbenchBlockTokens is the block size of the synthesised prefix blocks:
// the fleet default (schemas.DefaultBlockTokens), Mooncake's hash_ids
// block.
const lmbenchBlockTokens = 512

type lmbenchColumns struct {
	prompt, output, launch, user, n int // indexes, -1 when absent; n fields
}

// lmbenchRequired are the columns a log must have.
var lmbenchRequired = []string{"prompt_tokens", "generation_tokens", "launch_time"}

// isLMBenchHeader reports whether a lower-case first line is an LMBench
// log header.
func isLMBenchHeader(lower string) bool {
	return strings.HasPrefix(lower, "prompt_tokens,generation_tokens,")
}

func (p *lmbenchParser) parse(line []byte, _ int) (*Request, error) {
	fields, err := splitCSV(line)
	if err != nil {
		return nil, err
	}
	if !p.header {
		p.col, err = lmbenchHeader(fields)
		p.header = err == nil
		return nil, err
	}
	if len(fields) != p.col.n {
		return nil, fmt.Errorf("%d fields, want %d as in the header", len(fields), p.col.n)
	}
	return p.request(fields)
}

func lmbenchHeader(fields []string) (lmbenchColumns, error) {
	col := lmbenchColumns{n: len(fields)}
	find := func(name string) int {
		return slices.IndexFunc(fields, func(f string) bool { return strings.EqualFold(strings.TrimSpace(f), name) })
	}
	col.prompt, col.output, col.launch, col.user = find("prompt_tokens"), find("generation_tokens"), find("launch_time"), find("user_id")
	if col.prompt < 0 || col.output < 0 || col.launch < 0 {
		return col, fmt.Errorf("header is %q, want LMBench columns including %s", clip(strings.Join(fields, ","), 120), strings.Join(lmbenchRequired, ", "))
	}
	return col, nil
}

func (p *lmbenchParser) request(f []string) (*Request, error) {
	in, err1 := wholeNumber(f[p.col.prompt])
	out, err2 := wholeNumber(f[p.col.output])
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("prompt_tokens %q and generation_tokens %q must be whole numbers", clip(f[p.col.prompt], 40), clip(f[p.col.output], 40))
	}
	if err := checkTokens(in, out); err != nil {
		return nil, err
	}
	s, err := strconv.ParseFloat(f[p.col.launch], 64)
	if err != nil {
		return nil, fmt.Errorf("launch_time %q is not a number", clip(f[p.col.launch], 40))
	}
	r := &Request{InputTokens: int(in), OutputTokens: int(out)}
	if r.ArrivalNs, err = msToNs(s * 1000); err != nil {
		return nil, fmt.Errorf("launch_time: %w", err)
	}
	if p.col.user >= 0 {
		r.Conversation = strings.TrimSpace(f[p.col.user])
		if r.Conversation == "" {
			return nil, fmt.Errorf("user_id is empty")
		}
		r.Blocks = conversationBlocks(r.Conversation, r.InputTokens/lmbenchBlockTokens)
	}
	return r, nil
}

// wholeNumber parses an integer, also written as a float with no
// fraction ("76.0").
func wholeNumber(s string) (int64, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	return int64(v), nil
}

// conversationBlocks names the first n prompt blocks of conversation c:
// FNV-1a of c and the block's index, the same for every turn of c.
func conversationBlocks(c string, n int) []uint64 {
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	for k := range out {
		h := fnv.New64a()
		h.Write([]byte(c))
		h.Write([]byte{0, byte(k), byte(k >> 8), byte(k >> 16), byte(k >> 24)})
		out[k] = h.Sum64()
	}
	return out
}
