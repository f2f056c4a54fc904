package proto

// Policy ops (oxios-policy(5), ox-policy(1)).
const (
	OpPolicyShow = "policy.show"
	OpPolicySet  = "policy.set"
	// OpFSAccess is the audit op of a refusal by the mount itself: a walk
	// into the tree of an agent the caller may not act on, a symlink(2) or
	// link(2) in an agent's state. Not a request.
	OpFSAccess    = "fs.access"
	OpPolicyCheck = "policy.check"
	OpPolicyTest  = "policy.test"
)

// Record types of policies.
const (
	RecordPolicy      = "policy"
	RecordPolicyCheck = "policy_check"
	RecordPolicyTest  = "policy_test"
)

// PolicyRecord is an agent's policy.
type PolicyRecord struct {
	Type   string `json:"type"` // always "policy"
	Agent  string `json:"agent"`
	Source string `json:"source"` // "file" (its own) or "default"
	Digest string `json:"digest"` // blake3 of the text
	Text   string `json:"text"`   // the TOML
}

// PolicySetArgs are the args of policy.set (admin only).
type PolicySetArgs struct {
	Agent string `json:"agent"`
	Text  string `json:"text"`
}

// PolicyCheckArgs are the args of policy.check: would Op with Args be
// allowed for a run of Agent, under its policy or the proposed Policy?
// Ops and their args: state.load|state.list KEY, state.save|state.delete
// KEY, mem.remember KIND, exec COMMAND [ARG...] (one arg: a command
// line), tool.run TOOL, net.fetch URL.
type PolicyCheckArgs struct {
	Agent  string   `json:"agent"`
	Op     string   `json:"op"`
	Args   []string `json:"args,omitempty"`
	Policy string   `json:"policy,omitempty"`
}

// PolicyCheckRecord is the answer of policy.check.
type PolicyCheckRecord struct {
	Type    string   `json:"type"` // always "policy_check"
	Agent   string   `json:"agent"`
	Op      string   `json:"op"`
	Args    []string `json:"args,omitempty"`
	Allowed bool     `json:"allowed"`
	// Ask: an ask rule holds the op until an operator approves it.
	Ask    bool   `json:"ask,omitempty"`
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	Text   string `json:"text"`
}

// PolicyTestArgs are the args of policy.test: audit entries (as
// ox-audit prints them) replayed against a proposed policy.
type PolicyTestArgs struct {
	Agent   string   `json:"agent"`
	Policy  string   `json:"policy"`
	Entries []string `json:"entries"`
}

// PolicyTestRecord is a past action the proposed policy judges otherwise
// than what happened: "refuse" (it was done; the policy would refuse
// it) or "allow" (a policy refused it; this one would allow it).
type PolicyTestRecord struct {
	Type   string `json:"type"` // always "policy_test"
	Agent  string `json:"agent"`
	Seq    uint64 `json:"seq"`
	Op     string `json:"op"`
	Target string `json:"target"`
	Was    string `json:"was"`    // the entry's result: ok, EPERM...
	Change string `json:"change"` // refuse, allow or ask
	Rule   string `json:"rule,omitempty"`
	Reason string `json:"reason,omitempty"`
	Text   string `json:"text"`
}

// PolicyTestResult ends a policy.test stream: how many entries of the
// agent were judged, and how many the policy judges otherwise.
type PolicyTestResult struct {
	Judged  int `json:"judged"`
	Refused int `json:"refused"`
	Allowed int `json:"allowed"`
	Asked   int `json:"asked"`   // would wait for an operator (ask rules)
	Skipped int `json:"skipped"` // entries of other agents or ops a policy does not judge
}
