package client

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

func TestEncodeArgsMatchesJSON(t *testing.T) {
	for _, a := range []any{
		proto.StateArgs{Agent: "ops", Key: "a/\"b\"\n<x>"},
		proto.StateSaveArgs{Agent: "ops", Key: "k", Value: "v\x00\u2028\xff"},
		proto.StateSaveArgs{Agent: "ops", Key: "k", Value: "djE=", Encoding: "base64"},
		proto.StateListArgs{Agent: "ops", Prefix: "p"},
	} {
		got, err := encodeArgs(a)
		if err != nil {
			t.Fatal(err)
		}
		// Both must decode to the same value (encoding/json escapes <>&
		// where the hand encoder does not; both are valid JSON).
		want, _ := json.Marshal(a)
		gv := reflect.New(reflect.TypeOf(a))
		wv := reflect.New(reflect.TypeOf(a))
		if err := json.Unmarshal(got, gv.Interface()); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		json.Unmarshal(want, wv.Interface())
		if !reflect.DeepEqual(gv.Interface(), wv.Interface()) {
			t.Fatalf("hand %s\njson %s", got, want)
		}
	}
}

func FuzzFastReply(f *testing.F) {
	f.Add([]byte(`{"id":7,"ok":true,"result":{"type":"state"}}` + "\n"))
	f.Add([]byte(`{"id":7,"item":{"a":1}}`))
	f.Add([]byte(`{"id":7,"ok":false,"error":{"code":"ENOENT","message":"x"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		rep, ok := fastReply(line)
		if !ok {
			return
		}
		var slow proto.Reply
		if err := json.Unmarshal(line, &slow); err != nil {
			return // not JSON at all: the typed decode of Result fails later
		}
		if slow.ID != rep.ID || slow.OK != rep.OK || string(slow.Result) != string(rep.Result) || string(slow.Item) != string(rep.Item) {
			t.Fatalf("%q: fast %+v slow %+v", line, rep, slow)
		}
	})
}
