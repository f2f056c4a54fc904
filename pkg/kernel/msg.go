package kernel

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/oxios/oxios/pkg/approval"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/inbox"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Messages. Each agent has an inbox (package inbox, DATA/inbox): a send
// is durable before its reply, so a message accepted is never lost, and
// stays unread until a receive marks it read. Who may send to whom is
// the policies' msg rules: the sender's msg.send and the recipient's
// msg.accept. A run sends as its own agent; the admin sends as an
// operator or as any agent; a granted user as one of its agents. Each
// send and each refusal is audited.

// openTalk opens the inboxes and the desk of approvals; called by New.
func (k *Kernel) openTalk() error {
	ib, err := inbox.Open(filepath.Join(k.cfg.Data, "inbox"))
	if err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	// The recipient's policy bounds its inbox (msg.quota).
	ib.Quota = func(agent string) int64 {
		p, err := k.policyOf(agent)
		if err != nil {
			return policy.DefaultInboxQuota
		}
		return p.InboxQuota()
	}
	k.inbox = ib
	// Removals a crash cut between their inbox's detachment and their
	// end: the replayed journal says whether each agent is gone.
	for _, agent := range ib.Detached() {
		k.log.Warn("an agent's removal was cut by a crash: settling its inbox", "agent", agent, "removed", !k.AgentExists(agent))
		k.settleInbox(agent)
	}
	k.asks, err = approval.OpenDesk(k.auditSeq, filepath.Join(k.cfg.Data, "approvals"), k.note, func(run string, rec any) {
		if r, ok := k.sup.Get(run); ok {
			r.Emit(rec)
		}
	}, k.log)
	return err
}

func (k *Kernel) closeTalk() {
	if k.inbox != nil {
		k.inbox.Close()
	}
}

// MsgSend puts a message into a.To's inbox.
func (k *Kernel) MsgSend(ctx context.Context, c *Cred, a proto.MsgSendArgs, raw []byte) (proto.MsgRecord, error) {
	return sysMsgSend.Call(k, ctx, c, a, raw)
}

func (k *Kernel) msgSend(ctx context.Context, c *Cred, a proto.MsgSendArgs, raw []byte) (proto.MsgRecord, error) {
	from, err := k.msgCheck(c, a, raw, false)
	if err != nil {
		return proto.MsgRecord{}, err
	}
	deny := func(err *proto.Error, rule string) (proto.MsgRecord, error) {
		k.auditDenied(c, proto.OpMsgSend, msgTarget(a.To, from, rule), raw, err.Code)
		return proto.MsgRecord{}, err
	}
	m := inbox.Message{From: from, To: a.To, Text: a.Text, ReplyTo: a.ReplyTo, Records: a.Records}
	if from == "" || c.Agent == "" {
		m.Sender = operator(c)
	}
	rec, refused, err := k.inbox.Deliver(ctx, m, c.Actor(), audit.ArgsDigest(raw), k.note)
	if refused != nil {
		rule := ""
		if refused.Code == proto.EDQUOT {
			rule = "msg.quota"
		}
		return deny(refused, rule)
	} else if err != nil {
		return proto.MsgRecord{}, err
	}
	// The schedules that fire on messages wake (receivers wait on the
	// inbox).
	k.sched.MsgArrived(a.To)
	return rec, nil
}

// msgCheck runs msg.send's checks of a, but of its text when draft (a
// message the mount is about to be written: MsgMaySend), auditing a
// refusal; it returns the sending agent ("" for an operator).
func (k *Kernel) msgCheck(c *Cred, a proto.MsgSendArgs, raw []byte, draft bool) (string, error) {
	from, ferr := inbox.Sender(a, c.Agent, c.Run)
	deny := func(err *proto.Error, rule string) (string, error) {
		k.auditDenied(c, proto.OpMsgSend, msgTarget(a.To, from, rule), raw, err.Code)
		return "", err
	}
	if ferr != nil {
		return deny(ferr, "")
	}
	if err := proto.CheckAgent(a.To); err != nil {
		return deny(proto.Errorf(err.Code, "recipient: %s", err.Message), "")
	}
	if from != "" {
		if err := k.gate(call{op: proto.OpMsgSend, c: c, agent: from, raw: raw, target: inbox.Target(a.To, from, "")}); err != nil {
			return "", err
		}
	} else if !c.Admin && c.Agent == "" {
		return deny(proto.Errorf(proto.EPERM, "uid %d may send only as one of its agents (-a AGENT)", c.UID), "")
	}
	if !draft && strings.TrimSpace(a.Text) == "" && len(a.Records) == 0 {
		return deny(proto.Errorf(proto.EINVAL, "a message needs text or attached records"), "")
	}
	if ok, err := k.agentExists(a.To); err != nil {
		return "", proto.AsError(err)
	} else if !ok {
		return deny(proto.Errorf(proto.ENOENT, "no agent %q to send to (ox-spawn -a %s creates it)", a.To, a.To), "")
	}
	if from != "" {
		// The sender's policy answers the op's question (askSend); the
		// recipient's, whether it accepts the sender.
		if rule, err := policy.CheckMessage(from, a.To, k.policyOf); rule != "" {
			return deny(proto.AsError(err), rule)
		} else if err != nil {
			return "", err
		}
		if !draft {
			p, err := k.policyOf(from)
			if err != nil {
				return "", err
			}
			if d := policy.AsDenied(k.hook(k.root, p, c, proto.OpMsgSend, from, asking{ask: askSend, key: a.To}, false)); d != nil {
				return deny(d.Refused("send to "+a.To), d.Rule)
			}
		}
	}
	return from, nil
}

// msgTarget is the audit target of a refused message, with the rule that
// refused it.
func msgTarget(to, from, rule string) string {
	t := inbox.Target(to, from, "")
	if rule != "" {
		t += " [" + rule + "]"
	}
	return strings.ToValidUTF8(t, "?")
}

// MsgMaySend checks, as msg.send would (refusals audited alike), that c
// may send a message to to: the mount asks it when a file is created in
// an inbox, so that a refused send fails the create, which every program
// reports, rather than the close, which a shell's > does not.
func (k *Kernel) MsgMaySend(c *Cred, to string) error {
	_, err := k.msgCheck(c, proto.MsgSendArgs{To: to}, nil, true)
	return err
}

// MsgList emits the messages of a.Agent's inbox, oldest first.
func (k *Kernel) MsgList(ctx context.Context, c *Cred, a proto.MsgListArgs, raw []byte, emit func(*proto.MsgRecord) error) error {
	return sysMsgList.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) msgList(ctx context.Context, c *Cred, a proto.MsgListArgs, raw []byte, emit func(*proto.MsgRecord) error) error {
	return k.inbox.Records(a, emit)
}

// MsgRecv emits a.Agent's unread messages and marks each read once it
// was sent to the caller; with a.Follow it then waits for more, until
// ctx ends or a.Max messages were received. Without Follow and with
// a.Wait it waits that long for a first message.
func (k *Kernel) MsgRecv(ctx context.Context, c *Cred, a proto.MsgListArgs, raw []byte, emit func(*proto.MsgRecord) error) error {
	return sysMsgRecv.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) msgRecv(ctx context.Context, c *Cred, a proto.MsgListArgs, raw []byte, emit func(*proto.MsgRecord) error) error {
	return k.inbox.Receive(ctx, a, emit)
}

// MsgRead returns one message of agent's inbox (the mount's files).
func (k *Kernel) MsgRead(c *Cred, agent, id string) (proto.MsgRecord, error) {
	if err := k.gate(call{op: proto.OpMsgList, c: c, agent: agent, target: agent + ":inbox/" + id}); err != nil {
		return proto.MsgRecord{}, err
	}
	m, err := k.inbox.Get(agent, id)
	if err != nil {
		return proto.MsgRecord{}, proto.Errorf(proto.ENOENT, "%v", err)
	}
	return m.Record(), nil
}

// MsgIDs lists the ids of agent's messages (the mount's listing).
func (k *Kernel) MsgIDs(c *Cred, agent string) []string {
	if c.Authorize(agent) != nil {
		return nil
	}
	return k.inbox.IDs(agent, "")
}

// settleInbox ends the detachment of agent's inbox by its removal
// (inbox.Store.Detach): gone with the agent, or back if it is still
// there.
func (k *Kernel) settleInbox(agent string) {
	if err := k.inbox.Settle(agent, !k.AgentExists(agent)); err != nil {
		k.log.Warn("settling an inbox after its agent's removal", "agent", agent, "err", err)
	}
}

// MsgSlot reports whether the mount shows c, a run of another agent,
// /agent/TO/inbox as a slot to write messages into: only when agent to
// exists (as ox-msg send's ENOENT would tell). Whether a send is granted
// is decided by MsgSend at the write, refused and audited there.
func (k *Kernel) MsgSlot(c *Cred, to string) bool {
	if c.Agent == "" || c.Agent == to || proto.CheckAgent(to) != nil {
		return false
	}
	ok, err := k.agentExists(to)
	return ok && err == nil
}
