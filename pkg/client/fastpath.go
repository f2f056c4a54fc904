package client

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/oxios/oxios/pkg/proto"
)

// encodeArgs writes the args of the frequent ops by hand and the rest with
// encoding/json; the daemon reads the same args either way (the hand
// leaves HTML's characters unescaped, as they need not be).
func encodeArgs(args any) ([]byte, error) {
	if b, ok := appendArgs(nil, args); ok {
		return b, nil
	}
	return json.Marshal(args)
}

// handArgs are the args of the frequent ops, written by hand.
type handArgs struct {
	agent, key, value, encoding string
	save                        bool // state.save's: value and encoding too
}

// handEncoded returns args as handArgs, or nil for args written by
// encoding/json.
func handEncoded(args any) *handArgs {
	switch a := args.(type) {
	case proto.StateArgs:
		return &handArgs{agent: a.Agent, key: a.Key}
	case proto.StateSaveArgs:
		return &handArgs{agent: a.Agent, key: a.Key, value: a.Value, encoding: a.Encoding, save: true}
	}
	return nil
}

// append appends the args to b, as appendArgs does.
func (h *handArgs) append(b []byte) []byte {
	b = append(b, `{"agent":`...)
	b = proto.AppendString(b, h.agent)
	b = append(b, `,"key":`...)
	b = proto.AppendString(b, h.key)
	if h.save {
		b = append(b, `,"value":`...)
		b = proto.AppendString(b, h.value)
		if h.encoding != "" {
			b = append(b, `,"encoding":`...)
			b = proto.AppendString(b, h.encoding)
		}
	}
	return append(b, '}')
}

// appendArgs appends the args of the frequent ops to b, by hand; ok is
// false for other args.
func appendArgs(b []byte, args any) (_ []byte, ok bool) {
	field := func(b []byte, name, v string, omitEmpty bool) []byte {
		if omitEmpty && v == "" {
			return b
		}
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		return proto.AppendString(b, v)
	}
	switch a := args.(type) {
	case proto.StateArgs:
		b = append(b, '{')
		b = field(b, "agent", a.Agent, false)
		b = field(b, "key", a.Key, false)
		return append(b, '}'), true
	case proto.StateSaveArgs:
		b = append(b, '{')
		b = field(b, "agent", a.Agent, false)
		b = field(b, "key", a.Key, false)
		b = field(b, "value", a.Value, false)
		b = field(b, "encoding", a.Encoding, true)
		return append(b, '}'), true
	case proto.MemRememberArgs:
		return proto.AppendMemRememberArgs(b, &a)
	}
	return b, false
}

// fastReply splits the envelopes oxiosd writes, without reflection:
//
//	{"id":N,"ok":true,"result":...}   {"id":N,"item":...}
//
// Anything else goes through encoding/json.
func fastReply(line []byte) (proto.Reply, bool) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	const pre = `{"id":`
	if !bytes.HasPrefix(line, []byte(pre)) || line[len(line)-1] != '}' {
		return proto.Reply{}, false
	}
	p := line[len(pre):]
	n := 0
	var id uint64
	for n < len(p) && n < 19 && p[n] >= '0' && p[n] <= '9' {
		id = id*10 + uint64(p[n]-'0') // 19 digits cannot overflow
		n++
	}
	if n == 19 && len(p) > n && p[n] >= '0' && p[n] <= '9' {
		var err error
		id, err = strconv.ParseUint(string(p[:n+1]), 10, 64)
		if err != nil {
			return proto.Reply{}, false
		}
		n++
	}
	if n == 0 {
		return proto.Reply{}, false
	}
	p = p[n:]
	var raw []byte
	rep := proto.Reply{ID: id}
	switch {
	case bytes.HasPrefix(p, []byte(`,"ok":true,"result":`)):
		raw = p[len(`,"ok":true,"result":`) : len(p)-1]
		rep.OK = true
	case bytes.HasPrefix(p, []byte(`,"item":`)):
		raw = p[len(`,"item":`) : len(p)-1]
	default:
		return proto.Reply{}, false
	}
	// No validation pass: oxiosd writes nothing after the payload, and the
	// payload is decoded (and so checked) by whoever takes it; a reply
	// that is not what oxiosd writes fails there.
	if len(raw) == 0 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return proto.Reply{}, false
	}
	// raw is in line, the reader's buffer: the reply is copied before
	// the next read (see Client.deliverLocked).
	if rep.OK {
		rep.Result = raw
	} else {
		rep.Item = raw
	}
	return rep, true
}
