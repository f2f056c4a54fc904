package vfs

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/frontmatter"
	"github.com/oxios/oxios/pkg/proto"
)

// What a file written into mem/KIND/ or inbox/ holds, as the syscall's
// args: the rows NewMemory and NewMessage submit these.

// MemInput reads a file written into a kind's folder. It is the text of
// the memory, or a front matter and the text, as in the memory files
// (package memory), so that a memory's file copied into a folder is
// remembered again with its tags. Of the front matter, tags, source,
// importance and expires are taken, and ttl (a Go duration) too; id,
// kind and created are the kernel's to give (the folder is the kind).
// Keys may come in any order; tags may be written without brackets.
// Trailing newlines are not part of the text (`echo text > note.md`).
func MemInput(b []byte) (proto.MemoryInput, error) {
	var in proto.MemoryInput
	text, _, err := frontmatter.Scan(b, func(line int, l string) error {
		k, v, found := frontmatter.Field(l)
		if !found {
			return proto.Errorf(proto.EINVAL, "front matter line %d: want \"key: value\"", line)
		}
		switch k {
		case "id", "kind", "created":
		case "tags":
			v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
			for _, t := range strings.Split(v, ",") {
				if t = strings.TrimSpace(t); t != "" {
					in.Tags = append(in.Tags, t)
				}
			}
		case "source":
			in.Source = v
		case "importance":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return proto.Errorf(proto.EINVAL, "front matter line %d: importance %q is not a number", line, v)
			}
			in.Importance = f
		case "ttl":
			in.TTL = v
		case "expires":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return proto.Errorf(proto.EINVAL, "front matter line %d: expires %q is not an RFC 3339 time", line, v)
			}
			d := time.Until(t)
			if d <= 0 {
				return proto.Errorf(proto.EINVAL, "front matter line %d: expires %s is past", line, v)
			}
			in.TTL = d.String()
		default:
			return proto.Errorf(proto.EINVAL, "front matter line %d: unknown key %q", line, k)
		}
		return nil
	})
	if err != nil {
		return in, frontError(err)
	}
	in.Text = strings.TrimRight(string(text), "\n")
	return in, nil
}

// frontError is err, of frontmatter.Scan, as the mount answers it: a
// front matter not closed is EINVAL, as is a line its reader refused.
func frontError(err error) error {
	var u *frontmatter.Unclosed
	if errors.As(err, &u) {
		return proto.Errorf(proto.EINVAL, "front matter line %d: not closed by \"---\"", u.Line)
	}
	return err
}

// MsgInput reads a file written into an inbox: the text, or a front
// matter and the text. Of the front matter only reply_to is taken; id,
// from, to, time, sender and read are the kernel's (so a message's file
// copied into another inbox forwards its text).
func MsgInput(b []byte) (proto.MsgSendArgs, error) {
	var a proto.MsgSendArgs
	text, _, err := frontmatter.Scan(b, func(line int, l string) error {
		k, v, found := frontmatter.Field(l)
		if !found {
			return proto.Errorf(proto.EINVAL, "front matter line %d: want \"key: value\"", line)
		}
		switch k {
		case "id", "from", "to", "time", "sender", "read":
		case "reply_to":
			a.ReplyTo = v
		default:
			return proto.Errorf(proto.EINVAL, "front matter line %d: unknown key %q (reply_to is the one a sender gives)", line, k)
		}
		return nil
	})
	if err != nil {
		return a, frontError(err)
	}
	a.Text = strings.TrimRight(string(text), "\n")
	return a, nil
}
