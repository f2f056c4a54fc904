package agent

import (
	"context"
	"encoding/json"
	"errors"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/proto"
)

// KernelModel is the Model of a run: each call is llm.chat, made by the
// kernel, which holds the endpoint and its key, sets max_tokens from the
// budget before every attempt, charges and audits what each attempt used,
// and owns the breaker. The run needs no network and no key for it; the
// runner neither reserves nor charges (Metered).
type KernelModel struct {
	C     *client.Client
	Agent string
	// Model is asked ("" : the run's, else the [llm] model).
	Model string
	// Wait: a call that finds the endpoint's breaker open waits for it
	// instead of failing at once.
	Wait bool
	// Observe is told of the endpoint's events (retries, the breaker,
	// attempts whose text was discarded).
	Observe func(proto.EndpointRecord)
}

var _ Model = (*KernelModel)(nil)

// Metered reports that the kernel budgets and charges the calls.
func (m *KernelModel) Metered() bool { return true }

// Chat implements Model over llm.chat.
func (m *KernelModel) Chat(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool, opt llm.Options) (*llm.Turn, error) {
	a := proto.LLMChatArgs{Agent: m.Agent, Model: m.Model, MaxTokens: opt.MaxTokens, Temperature: opt.Temperature,
		Stream: opt.OnDelta != nil, Wait: m.Wait || opt.Wait, Schema: opt.Schema}
	var err error
	if a.Messages, err = json.Marshal(msgs); err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		if a.Tools, err = json.Marshal(tools); err != nil {
			return nil, err
		}
	}
	var failed *proto.LLMErrorRecord
	rec, err := m.C.LLMChat(ctx, a, func(item json.RawMessage) error {
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(item, &head) != nil {
			return nil
		}
		switch head.Type {
		case proto.RecordLLMDelta:
			var d proto.LLMDeltaRecord
			if json.Unmarshal(item, &d) == nil && opt.OnDelta != nil {
				opt.OnDelta(d.Text)
			}
		case proto.RecordEndpoint:
			var e proto.EndpointRecord
			if json.Unmarshal(item, &e) == nil && m.Observe != nil {
				m.Observe(e)
			}
		case proto.RecordLLMError:
			failed = &proto.LLMErrorRecord{}
			json.Unmarshal(item, failed)
		}
		return nil
	})
	if err != nil {
		var pe *proto.Error
		if failed == nil || !errors.As(err, &pe) {
			return nil, err
		}
		return nil, &llm.Error{Class: llm.Class(failed.Class), Status: failed.Status, Attempts: failed.Attempts, Err: errors.New(failed.Text),
			Partial: failed.Partial, Model: failed.Model, RetryAt: failed.RetryAt, Charged: true,
			Spent: openai.Usage{PromptTokens: int(failed.PromptTokens), CompletionTokens: int(failed.FailedTokens - failed.PromptTokens), TotalTokens: int(failed.FailedTokens)}}
	}
	t := &llm.Turn{Content: rec.Content, Finish: rec.Finish, Model: rec.Model, Attempts: rec.Attempts,
		Usage:   openai.Usage{PromptTokens: int(rec.PromptTokens), CompletionTokens: int(rec.CompletionTokens), TotalTokens: int(rec.PromptTokens + rec.CompletionTokens)},
		Spent:   openai.Usage{TotalTokens: int(rec.FailedTokens), CompletionTokens: int(rec.FailedTokens)},
		Charged: true, MaxTokens: rec.MaxTokens, Capped: rec.Capped, Cost: rec.Cost, RunTokens: rec.RunTokens, RunCost: rec.RunCost, Over: rec.Over}
	if len(rec.ToolCalls) > 0 {
		if err := json.Unmarshal(rec.ToolCalls, &t.ToolCalls); err != nil {
			return nil, err
		}
	}
	return t, nil
}
