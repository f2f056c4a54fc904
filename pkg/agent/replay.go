package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/proto"
)

// A replay runs a run again with the model's recorded answers served
// back instead of asking the model, so the same tool calls are made in
// the same order, today, under today's policy; it reports the first
// point where what happens differs from the recording (ox-replay(1)).
// Everything it needs is in the run's records: the opening messages,
// each answer (the records its Turn numbers) and each tool result.

// Recording is a run as its records tell it.
type Recording struct {
	Run, Agent, Task string
	// Work is the host folder the run worked on (ox-spawn --work), "" for
	// none.
	Work string
	// Opening is the conversation before the model's first answer.
	Opening []openai.ChatCompletionMessage
	Answers []Answer
	// Error is how the run ended when it ended without an answer.
	Error *proto.ErrorRecord
}

// Answer is one answer of the model and what its tool calls returned.
type Answer struct {
	Content   string
	ToolCalls []openai.ToolCall
	// Results are the tool results, in the order of the calls (fewer
	// when the run ended during them).
	Results []proto.ToolResultRecord
	Usage   proto.UsageRecord
}

// ReadRecording reads a run's records (JSON lines, as run.attach gives
// them) into its Recording. A run whose records do not number its
// answers (a runner older than replay), or that has none, is refused.
func ReadRecording(rd io.Reader) (*Recording, error) {
	rec := &Recording{}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	unnumbered := false
	answer := func(turn int) *Answer {
		for len(rec.Answers) < turn {
			rec.Answers = append(rec.Answers, Answer{})
		}
		return &rec.Answers[turn-1]
	}
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var head struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			return nil, fmt.Errorf("record %d is not a JSON object: %v", n, err)
		}
		var err error
		switch head.Type {
		case proto.RecordRun:
			var r proto.RunRecord
			if err = json.Unmarshal(line, &r); err == nil && rec.Run == "" {
				rec.Run, rec.Agent, rec.Task, rec.Work = r.ID, r.Agent, r.Task, r.Work
			}
		case proto.RecordMessage:
			var m proto.MessageRecord
			if err = json.Unmarshal(line, &m); err != nil {
				break
			}
			switch {
			case m.Turn > 0:
				answer(m.Turn).Content = m.Text
			case len(rec.Answers) == 0 && m.Role != openai.ChatMessageRoleAssistant:
				rec.Opening = append(rec.Opening, openai.ChatCompletionMessage{Role: m.Role, Content: m.Text})
			}
		case proto.RecordUsage:
			var u proto.UsageRecord
			if err = json.Unmarshal(line, &u); err != nil {
				break
			}
			if u.Turn > 0 {
				answer(u.Turn).Usage = u
			} else if u.FailedTokens == 0 {
				unnumbered = true
			}
		case proto.RecordToolCall:
			var c proto.ToolCallRecord
			if err = json.Unmarshal(line, &c); err != nil || c.Turn == 0 {
				break
			}
			a := answer(c.Turn)
			a.ToolCalls = append(a.ToolCalls, openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}})
		case proto.RecordToolResult:
			var t proto.ToolResultRecord
			if err = json.Unmarshal(line, &t); err != nil || len(rec.Answers) == 0 {
				break
			}
			a := &rec.Answers[len(rec.Answers)-1]
			if len(a.Results) < len(a.ToolCalls) && a.ToolCalls[len(a.Results)].ID == t.ID {
				a.Results = append(a.Results, t)
			}
			// Else not an answer's call: the run's summary remembered.
		case proto.RecordError:
			var e proto.ErrorRecord
			if err = json.Unmarshal(line, &e); err == nil {
				rec.Error = &e
			}
		}
		if err != nil {
			return nil, fmt.Errorf("record %d (%s): %v", n, head.Type, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rec.Answers) == 0 {
		if unnumbered {
			return nil, errors.New("its records do not number the model's answers (recorded by an ox-agent older than replay): it cannot be replayed")
		}
		return nil, errors.New("it holds no answer of a model to replay (not an LLM run, or its first model call failed)")
	}
	for i, a := range rec.Answers {
		if a.Usage.Turn == 0 {
			return nil, fmt.Errorf("answer %d has no usage record: the records are incomplete", i+1)
		}
	}
	for _, m := range rec.Opening {
		if m.Role == openai.ChatMessageRoleUser {
			rec.Task = m.Content // the last user message is the task
		}
	}
	return rec, nil
}

// Replay serves a recording's answers as the run's Model, and compares
// the run's records with the recording's as they are emitted (Observe).
// It neither asks a model nor spends budget: what each answer used is
// the recording's.
type Replay struct {
	Rec *Recording
	// Of is the run replayed, for the report.
	Of string
	// Ask, if set, is asked afresh instead: each of its answers is
	// compared with the recorded one, the first difference reported, and
	// the run goes on to its own end (ox-replay --model).
	Ask Model

	served int // answers served
	calls  int // tool calls of the current answer seen
	res    int // tool results of the current answer seen
	total  int // tool calls compared
	diff   *proto.ReplayRecord
}

var _ Model = (*Replay)(nil)

// errDiverged ends a replay that no longer follows its recording.
var errDiverged = proto.Errorf(proto.ECANCELED, "the replay diverged from its recording")

// Metered reports that the replay's answers are charged by nobody: the
// runner reserves no budget for them.
func (p *Replay) Metered() bool { return true }

// Chat serves the next recorded answer, once the previous answer's
// tool results have all come as recorded.
func (p *Replay) Chat(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool, opt llm.Options) (*llm.Turn, error) {
	if p.Ask != nil {
		return p.afresh(ctx, msgs, tools, opt)
	}
	if p.diff != nil {
		return nil, errDiverged
	}
	if p.missing() {
		return nil, errDiverged
	}
	if p.served >= len(p.Rec.Answers) {
		p.diverge(p.served+1, 0, "", "", "the end of the run", "another model call",
			fmt.Sprintf("the replay asked the model again after the %d answers the recording holds, which ended there", len(p.Rec.Answers)))
		return nil, errDiverged
	}
	a := p.Rec.Answers[p.served]
	p.served++
	p.calls, p.res = 0, 0
	if a.Content != "" && opt.OnDelta != nil {
		opt.OnDelta(a.Content)
	}
	t := &llm.Turn{Content: a.Content, ToolCalls: a.ToolCalls, Finish: a.Usage.Finish, Model: a.Usage.Model, Attempts: a.Usage.Attempts,
		Usage:   openai.Usage{PromptTokens: int(a.Usage.PromptTokens), CompletionTokens: int(a.Usage.CompletionTokens), TotalTokens: int(a.Usage.PromptTokens + a.Usage.CompletionTokens)},
		Charged: true, RunTokens: a.Usage.RunTokens, RunCost: a.Usage.Cost}
	if p.served == len(p.Rec.Answers) && p.Rec.Error != nil && p.Rec.Error.Code == proto.EDQUOT && len(a.Results) == 0 {
		// The recording's run ended over budget on this answer's charge:
		// so does the replay's, without charging anything.
		t.Over = p.Rec.Error.Text
	}
	return t, nil
}

// afresh asks the model and compares its answer with the recorded one.
func (p *Replay) afresh(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool, opt llm.Options) (*llm.Turn, error) {
	p.missing()
	t, err := p.Ask.Chat(ctx, msgs, tools, opt)
	n := p.served
	p.served++
	if err != nil || p.diff != nil {
		return t, err
	}
	p.calls, p.res = 0, 0
	if n >= len(p.Rec.Answers) {
		p.diverge(n+1, 0, "", "", "the end of the run", OneLine(t.Content, 300),
			fmt.Sprintf("the model answered a %d%s time; the recording ended after %d answers", n+1, ordinal(n+1), len(p.Rec.Answers)))
		return t, nil
	}
	a := p.Rec.Answers[n]
	if strings.TrimSpace(a.Content) != strings.TrimSpace(t.Content) {
		p.diverge(n+1, 0, "", "", OneLine(a.Content, 300), OneLine(t.Content, 300),
			fmt.Sprintf("answer %d: the recorded model said %q, the model now %q", n+1, OneLine(a.Content, 120), OneLine(t.Content, 120)))
	}
	return t, nil
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// missing reports (and records) that the current answer's tool calls
// ended before the recording's did.
func (p *Replay) missing() bool {
	if p.served == 0 || p.diff != nil {
		return p.diff != nil
	}
	a := p.Rec.Answers[p.served-1]
	if p.res < len(a.Results) {
		tc := a.ToolCalls[p.res]
		p.diverge(p.served, p.res+1, tc.Function.Name, tc.Function.Arguments, describe(a.Results[p.res]), "no result",
			fmt.Sprintf("the replay made no call %d of answer %d (%s), where the recording did", p.res+1, p.served, tc.Function.Name))
		return true
	}
	return false
}

// Observe compares a record the replay emits with the recording.
func (p *Replay) Observe(rec any) {
	if p.diff != nil || p.served == 0 {
		return
	}
	a := p.Rec.Answers[p.served-1]
	switch v := rec.(type) {
	case *proto.ToolCallRecord:
		p.calls++
		p.total++
		if p.calls > len(a.ToolCalls) {
			p.diverge(p.served, p.calls, v.Name, v.Arguments, "no call", v.Name+" "+v.Arguments,
				fmt.Sprintf("answer %d: the replay made a tool call %d (%s) the recording has not", p.served, p.calls, v.Name))
			return
		}
		want := a.ToolCalls[p.calls-1].Function
		if want.Name != v.Name || want.Arguments != v.Arguments {
			p.diverge(p.served, p.calls, v.Name, v.Arguments, want.Name+" "+want.Arguments, v.Name+" "+v.Arguments,
				fmt.Sprintf("answer %d, tool call %d: the recording called %s, the replay %s", p.served, p.calls, want.Name, v.Name))
		}
	case *proto.ToolResultRecord:
		if p.res >= p.calls || len(a.ToolCalls) == 0 {
			return // not a tool call's: the run's summary
		}
		p.res++
		tc := a.ToolCalls[min(p.res, len(a.ToolCalls))-1].Function
		if p.res > len(a.Results) {
			p.diverge(p.served, p.res, tc.Name, tc.Arguments, "the end of the run", describe(*v),
				fmt.Sprintf("answer %d, tool call %d (%s): the recording's run ended before its result; the replay went on", p.served, p.res, tc.Name))
			return
		}
		want := a.Results[p.res-1]
		if want.Error != v.Error || want.Code != v.Code || normal(want.Name, want.Text) != normal(v.Name, v.Text) {
			p.diverge(p.served, p.res, tc.Name, tc.Arguments, describe(want), describe(*v),
				fmt.Sprintf("answer %d, tool call %d (%s %s): the recording got %q, the replay %q", p.served, p.res, tc.Name, tc.Arguments, describe(want), describe(*v)))
		}
	}
}

// End is the replay's report, once the run ended with err.
func (p *Replay) End(err error) *proto.ReplayRecord {
	if p.diff == nil && !p.missing() {
		n := len(p.Rec.Answers)
		switch {
		case p.served < n:
			p.diverge(p.served, 0, "", "", fmt.Sprintf("%d answers", n), ended(err),
				fmt.Sprintf("the replay ended after answer %d of the recording's %d: %s", p.served, n, ended(err)))
		case p.Rec.Error == nil && err != nil:
			p.diverge(p.served, 0, "", "", "an answer", ended(err),
				fmt.Sprintf("the recording ended with an answer; the replay %s", ended(err)))
		case p.Rec.Error != nil && err == nil:
			p.diverge(p.served, 0, "", "", p.Rec.Error.Code+": "+p.Rec.Error.Text, "an answer",
				fmt.Sprintf("the recording ended with an error (%s: %s); the replay with an answer", p.Rec.Error.Code, p.Rec.Error.Text))
		case p.Rec.Error != nil && fatalCode(err) != p.Rec.Error.Code:
			p.diverge(p.served, 0, "", "", p.Rec.Error.Code+": "+p.Rec.Error.Text, ended(err),
				fmt.Sprintf("the recording ended with an error (%s: %s); the replay %s", p.Rec.Error.Code, p.Rec.Error.Text, ended(err)))
		}
	}
	if p.diff != nil {
		return p.diff
	}
	return &proto.ReplayRecord{Type: proto.RecordReplay, Of: p.Of, Matched: true, Answers: p.served, ToolCalls: p.total,
		Text: fmt.Sprintf("the replay of run %s matched its recording: %s served, %s with the same results, the same end", p.Of, count(p.served, "answer"), count(p.total, "tool call"))}
}

// count is "1 answer", "2 answers".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func (p *Replay) diverge(turn, step int, tool, args, want, got, text string) {
	p.diff = &proto.ReplayRecord{Type: proto.RecordReplay, Of: p.Of, Answers: p.served, ToolCalls: p.total,
		Turn: turn, Step: step, Tool: tool, Arguments: args, Want: want, Got: got,
		Text: fmt.Sprintf("the replay of run %s diverged: %s", p.Of, text)}
}

func ended(err error) string {
	if err == nil {
		return "ended with an answer"
	}
	return "ended with an error (" + fatalCode(err) + ": " + err.Error() + ")"
}

func fatalCode(err error) string {
	var f *Fatal
	if errors.As(err, &f) {
		return f.Code
	}
	return proto.EIO
}

// describe is a tool result as a report shows it.
func describe(t proto.ToolResultRecord) string {
	if t.Code != "" && !strings.Contains(t.Text, t.Code) {
		return t.Text + " (" + t.Code + ")"
	}
	return t.Text
}

// fresh matches what differs between two runs of the same call by
// nature, not by what the code or policy did: a new memory's id.
var fresh = regexp.MustCompile(`^remembered as \S+`)

// normal is a tool result's text with what is fresh each time blanked.
func normal(tool, text string) string {
	if tool == "remember" {
		return fresh.ReplaceAllString(text, "remembered as ID")
	}
	return text
}
