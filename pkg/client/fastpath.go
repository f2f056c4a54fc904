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
		b := append(make([]byte, 0, 64+len(a.Key)), '{')
		b = field(b, "agent", a.Agent, false)
		b = field(b, "key", a.Key, false)
		return append(b, '}'), nil
	case proto.StateSaveArgs:
		b := append(make([]byte, 0, 64+len(a.Key)+len(a.Value)), '{')
		b = field(b, "agent", a.Agent, false)
		b = field(b, "key", a.Key, false)
		b = field(b, "value", a.Value, false)
		b = field(b, "encoding", a.Encoding, true)
		return append(b, '}'), nil
	}
	return json.Marshal(args)
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
	// Valid is a scan without reflection; it rules out anything after the
	// payload (another field, spaces) being taken for part of it.
	if len(raw) == 0 || raw[0] != '{' || raw[len(raw)-1] != '}' || !json.Valid(raw) {
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
