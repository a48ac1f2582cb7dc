package backtest

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestReadLMBenchShareGPT(t *testing.T) {
	in := "prompt_tokens,generation_tokens,ttft,generation_time,launch_time,finish_time\n" +
		"689,275,0.128,10.73,1746748559.9169319,1746748570.775\n" +
		"543,332,0.087,13.69,1746748559.5,1746748573.82\n"
	tr := readString(t, in, ReadOptions{})
	want := []Request{
		{ArrivalNs: 0, InputTokens: 543, OutputTokens: 332},
		{ArrivalNs: 416_932_000, InputTokens: 689, OutputTokens: 275},
	}
	if tr.Format != FormatLMBench || len(tr.Requests) != 2 {
		t.Fatalf("got %s %+v", tr.Format, tr.Requests)
	}
	for i, r := range tr.Requests {
		w := want[i]
		// Unix seconds as float64 keep about 0.2 us.
		if d := r.ArrivalNs - w.ArrivalNs; d < -1000 || d > 1000 || r.InputTokens != w.InputTokens ||
			r.OutputTokens != w.OutputTokens || r.Conversation != "" || r.Blocks != nil {
			t.Fatalf("request %d: %+v, want %+v", i, r, w)
		}
	}
}

// Multi-round logs: user_id is the conversation, token counts come as
// floats, and the turns of one user share the prefix blocks their
// shorter prompt fills.
func TestReadLMBenchMultiRound(t *testing.T) {
	in := "prompt_tokens,generation_tokens,ttft,generation_time,user_id,question_id,launch_time,finish_time\n" +
		"1100.0,20.0,0.04,0.54,1203,1,1746687514.0,1746687514.7\n" +
		"76.0,20.0,0.04,0.54,1204,1,1746687515.0,1746687515.6\n" +
		"1700.0,20.0,0.05,0.55,1203,2,1746687520.0,1746687520.6\n"
	tr := readString(t, in, ReadOptions{Format: FormatLMBench})
	a, b, c := tr.Requests[0], tr.Requests[1], tr.Requests[2]
	if a.Conversation != "1203" || b.Conversation != "1204" || c.Conversation != "1203" || c.ArrivalNs != 6e9 ||
		a.InputTokens != 1100 || a.OutputTokens != 20 {
		t.Fatalf("requests %+v", tr.Requests)
	}
	if len(a.Blocks) != 2 || len(b.Blocks) != 0 || len(c.Blocks) != 3 || !slices.Equal(c.Blocks[:2], a.Blocks) {
		t.Fatalf("blocks %v, %v, %v: want 2, 0 and 3 blocks, the second turn extending the first", a.Blocks, b.Blocks, c.Blocks)
	}
	other := conversationBlocks("1204", 2)
	if slices.Contains(a.Blocks, other[0]) || a.Blocks[0] == a.Blocks[1] {
		t.Fatalf("blocks of different users or indexes collide: %v %v", a.Blocks, other)
	}
}

func TestLMBenchBadLines(t *testing.T) {
	const head = "prompt_tokens,generation_tokens,ttft,generation_time,launch_time,finish_time\n"
	for _, tc := range []struct {
		name, in string
		line     int
		msg      string
	}{
		{"missing column", "prompt_tokens,generation_tokens,ttft\n1,1,1\n", 1, "launch_time"},
		{"fields", head + "1,1,0.1,0.2,5\n", 2, "5 fields, want 6"},
		{"fraction", head + "76.5,1,0.1,0.2,5,6\n", 2, "whole numbers"},
		{"zero output", head + "76,0,0.1,0.2,5,6\n", 2, "output tokens"},
		{"launch", head + "76,1,0.1,0.2,soon,6\n", 2, "launch_time"},
		{"negative launch", head + "76,1,0.1,0.2,-5,6\n", 2, "launch_time"},
		{"empty user", "prompt_tokens,generation_tokens,user_id,launch_time\n5,1, ,7\n", 2, "user_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tc.in), ReadOptions{Format: FormatLMBench})
			var le *LineError
			if !errors.As(err, &le) || le.Line != tc.line || !errors.Is(err, ErrBadTrace) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want line %d mentioning %q", err, tc.line, tc.msg)
			}
		})
	}
}

func FuzzReadLMBench(f *testing.F) {
	fuzzTrace(f, FormatLMBench,
		"prompt_tokens,generation_tokens,ttft,generation_time,launch_time,finish_time\n689,275,0.128,10.7,1746748559.91,1746748570.7\n",
		"prompt_tokens,generation_tokens,ttft,generation_time,user_id,question_id,launch_time,finish_time\n76.0,20.0,0.04,0.5,1203,1,1746687514.15,1746687514.7\n")
}
