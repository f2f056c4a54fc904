package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// Files made fresh at each open: read-only, a snapshot of one syscall's
// answer for the caller (stat shows its size, made the same way).

// Policy is /agent/NAME/policy: the agent's policy (policy.show). Only
// the admin changes it, with ox-policy set; a write here is refused and
// audited.
var Policy = &Kind{
	Name: "policy",
	Mode: 0o444,
	Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
		rec, err := k.PolicyShow(ctx, c, n.Agent, nil)
		return []byte(rec.Text), err
	},
	Refused: func(k Kernel, c *kernel.Cred, n *Node) { k.PolicyWriteRefused(c, n.Agent) },
}

// AgentStatus is /agent/NAME/status: a record like every ox-* prints.
var AgentStatus = &Kind{
	Name: "status",
	Mode: 0o444,
	Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
		s := statusRecord{Type: "status", Agent: n.Agent}
		var last int64
		err := k.StateList(ctx, c, proto.StateListArgs{Agent: n.Agent}, nil, func(r *proto.StateRecord) error {
			s.Keys++
			s.Bytes += r.Size
			if t := r.Modified.UnixNano(); t > last {
				last = t
				s.Modified = r.Modified.Format("2006-01-02T15:04:05.999999999Z07:00")
			}
			return nil
		})
		var pe *proto.Error
		if err != nil && !(errors.As(err, &pe) && pe.Code == proto.ENOENT) { // ENOENT: an agent made by mkdir
			return nil, err
		}
		s.Text = fmt.Sprintf("%s: %d keys, %d bytes", n.Agent, s.Keys, s.Bytes)
		return jsonLine(s)
	},
}

// statusRecord is what AgentStatus reads.
type statusRecord struct {
	Type     string `json:"type"` // always "status"
	Agent    string `json:"agent"`
	Keys     int    `json:"keys"`
	Bytes    int64  `json:"bytes"`
	Modified string `json:"modified,omitempty"` // the last save, RFC 3339
	Text     string `json:"text"`
}

// AuditHead is /audit/head: the chain's head (audit.head).
var AuditHead = &Kind{
	Name: "head",
	Mode: 0o444,
	Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
		h, err := k.AuditHead(ctx, c)
		if err != nil {
			return nil, err
		}
		return jsonLine(h)
	},
}

// Message is /agent/NAME/inbox/ID.md: a front matter, the text, and
// attached records one JSON line each after a line "---". Reading it
// does not receive it (ox-msg recv does).
var Message = &Kind{
	Mode: 0o444,
	Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
		rec, err := k.MsgRead(c, n.Agent, n.ID)
		if err != nil {
			return nil, err
		}
		return MsgFile(&rec), nil
	},
}

// MsgFile is a message's file.
func MsgFile(m *proto.MsgRecord) []byte {
	var b bytes.Buffer
	from := m.From
	if from == "" {
		from = "operator"
	}
	fmt.Fprintf(&b, "---\nid: %s\nfrom: %s\nto: %s\ntime: %s\n", m.ID, from, m.Agent, m.Time.Format(time.RFC3339Nano))
	if m.Sender != "" {
		fmt.Fprintf(&b, "sender: %s\n", m.Sender)
	}
	if m.ReplyTo != "" {
		fmt.Fprintf(&b, "reply_to: %s\n", m.ReplyTo)
	}
	fmt.Fprintf(&b, "read: %t\n---\n%s\n", m.Read, m.Text)
	if len(m.Records) > 0 {
		b.WriteString("---\n")
		for _, r := range m.Records {
			b.Write(r)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// Approval is /approvals/ID: a pending approval request as a JSON record;
// an operator decides with ox-approve yes|no ID.
var Approval = &Kind{
	Mode: 0o444,
	Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
		rec, err := k.ApprovalRead(c, n.ID)
		if err != nil {
			return nil, err
		}
		return jsonLine(rec)
	},
}

// Approvals is /approvals: the pending requests the caller may see.
func (l *Layer) Approvals() Dir { return approvalsDir{l.k} }

type approvalsDir struct{ k Kernel }

func (d approvalsDir) Entries(ctx context.Context, c *kernel.Cred) ([]Entry, error) {
	ids := d.k.ApprovalIDs(c)
	es := make([]Entry, 0, len(ids))
	for _, id := range ids {
		es = append(es, Entry{Name: id, File: &Node{Kind: Approval, ID: id}})
	}
	return es, nil
}

func (d approvalsDir) Lookup(ctx context.Context, c *kernel.Cred, name string) (Entry, error) {
	if _, err := d.k.ApprovalRead(c, name); err != nil {
		return Entry{}, err
	}
	return Entry{Name: name, File: &Node{Kind: Approval, ID: name}}, nil
}
