package proto

import "time"

// Memory ops (issue 5).
const (
	OpMemRemember = "mem.remember"
	OpMemRecall   = "mem.recall"
	OpMemForget   = "mem.forget"
	OpMemList     = "mem.list"
)

// RecordMemory is the record type of MemoryRecord.
const RecordMemory = "memory"

// MaxRememberBatch bounds the memories of one mem.remember request.
const MaxRememberBatch = 10000

// MemoryInput is one memory to remember. Kind defaults to episodic; TTL
// is a Go duration ("90m", "24h"); working memory gets the daemon's
// default TTL when none is given, and "0" means no expiry.
type MemoryInput struct {
	Kind       string   `json:"kind,omitempty"`
	Text       string   `json:"text"`
	Tags       []string `json:"tags,omitempty"`
	Source     string   `json:"source,omitempty"`
	Importance float64  `json:"importance,omitempty"`
	TTL        string   `json:"ttl,omitempty"`
}

// MemRememberArgs are the args of mem.remember: a batch of memories of one
// agent, made durable by one group commit, all or none.
type MemRememberArgs struct {
	Agent    string        `json:"agent"`
	Memories []MemoryInput `json:"memories"`
}

// MemRememberResult is the reply of mem.remember: the records of the
// memories, in request order, without their text.
type MemRememberResult struct {
	Memories []MemoryRecord `json:"memories"`
}

// MemRecallArgs are the args of mem.recall.
type MemRecallArgs struct {
	Agent string `json:"agent,omitempty"`
	// AllAgents searches every agent (admin only) and merges by score.
	AllAgents bool      `json:"all_agents,omitempty"`
	Query     string    `json:"query"`
	K         int       `json:"k,omitempty"`
	Kind      string    `json:"kind,omitempty"`
	Tags      []string  `json:"tags,omitempty"`
	Since     time.Time `json:"since,omitempty"`
	MinScore  float64   `json:"min_score,omitempty"`
}

// MemForgetArgs are the args of mem.forget: the memories with the given
// ids, or those with every given tag, or those created before Before (the
// selectors combine with "and" when several are given).
type MemForgetArgs struct {
	Agent  string    `json:"agent"`
	IDs    []string  `json:"ids,omitempty"`
	Tags   []string  `json:"tags,omitempty"`
	Before time.Time `json:"before,omitempty"`
}

// MemListArgs are the args of mem.list.
type MemListArgs struct {
	Agent string    `json:"agent"`
	Kind  string    `json:"kind,omitempty"`
	Tags  []string  `json:"tags,omitempty"`
	Since time.Time `json:"since,omitempty"`
}

// MemoryRecord is the "memory" record: an item of recall and list, the
// result of remember and forget.
type MemoryRecord struct {
	Type       string     `json:"type"` // always "memory"
	ID         string     `json:"id"`
	Agent      string     `json:"agent"`
	Kind       string     `json:"kind"`
	Text       string     `json:"text,omitempty"`
	Score      float64    `json:"score,omitempty"`
	Tags       []string   `json:"tags,omitempty"`
	Source     string     `json:"source,omitempty"`
	Created    time.Time  `json:"created"`
	Importance float64    `json:"importance,omitempty"`
	Expires    *time.Time `json:"expires,omitempty"`
	Forgotten  bool       `json:"forgotten,omitempty"`
}
