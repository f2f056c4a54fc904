package client

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/oxios/oxios/pkg/proto"
)

// encodeArgs writes the args of the frequent ops by hand and the rest with
// encoding/json; the bytes are the same either way.
func encodeArgs(args any) ([]byte, error) {
	if b, ok := appendArgs(nil, args); ok {
		return b, nil
	}
	return json.Marshal(args)
}

// handEncoded reports whether appendArgs writes args.
func handEncoded(args any) bool {
	switch args.(type) {
	case proto.StateArgs, proto.StateSaveArgs:
		return true
	}
	return false
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
	}
	return b, false
}

// fastReply splits the envelopes oxiosd writes, without reflection:
//
//	{"id":N,"ok":true,"result":...}   {"id":N,"item":...}
//
// Anything else goes through encoding/json.
func fastReply(line []byte) (*proto.Reply, bool) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	const pre = `{"id":`
	if !bytes.HasPrefix(line, []byte(pre)) || line[len(line)-1] != '}' {
		return nil, false
	}
	p := line[len(pre):]
	n := 0
	for n < len(p) && n < 20 && p[n] >= '0' && p[n] <= '9' {
		n++
	}
	id, err := strconv.ParseUint(string(p[:n]), 10, 64)
	if n == 0 || err != nil {
		return nil, false
	}
	p = p[n:]
	var raw []byte
	rep := &proto.Reply{ID: id}
	switch {
	case bytes.HasPrefix(p, []byte(`,"ok":true,"result":`)):
		raw = p[len(`,"ok":true,"result":`) : len(p)-1]
		rep.OK = true
	case bytes.HasPrefix(p, []byte(`,"item":`)):
		raw = p[len(`,"item":`) : len(p)-1]
	default:
		return nil, false
	}
	// No validation pass: oxiosd writes nothing after the payload, and the
	// payload is decoded (and so checked) by whoever takes it; a reply
	// that is not what oxiosd writes fails there.
	if len(raw) == 0 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return nil, false
	}
	// The line is the reader's buffer: the reply outlives it.
	raw = append(json.RawMessage(nil), raw...)
	if rep.OK {
		rep.Result = raw
	} else {
		rep.Item = raw
	}
	return rep, true
}
