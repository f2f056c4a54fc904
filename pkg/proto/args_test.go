package proto

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzFastArgs: whatever the args' fast path accepts, encoding/json reads
// the same way; the fast path may only decline, never differ.
func FuzzFastArgs(f *testing.F) {
	for _, s := range []string{
		`{"agent":"ops","key":"k","value":"v"}`,
		`{"agent":"ops","key":"k"}`,
		`{"agent":"ops","key":"k","key":"j"}`,
		`{"agent":"ops","key":"k","value":"ü\u00e9","encoding":""}`,
		`{"agent":"a"}`, `{}`, `{"agent":1}`, `{"agent":"a","x":"y"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		var fa, sa StateSaveArgs
		fastSaveArgs(nil, &fa)
		fastStateArgs([]byte("{"), &StateArgs{})
		if fastSaveArgs(args, &fa) {
			d := json.NewDecoder(bytes.NewReader(args))
			d.DisallowUnknownFields()
			if err := d.Decode(&sa); err != nil || fa != sa {
				t.Fatalf("%s: fast %+v, slow %+v (%v)", args, fa, sa, err)
			}
		}
		var fl, sl StateArgs
		if fastStateArgs(args, &fl) {
			d := json.NewDecoder(bytes.NewReader(args))
			d.DisallowUnknownFields()
			if err := d.Decode(&sl); err != nil || fl != sl {
				t.Fatalf("%s: fast %+v, slow %+v (%v)", args, fl, sl, err)
			}
		}
		// Decoded or refused with the op named, never half-decoded.
		var a StateArgs
		if err := DecodeStateArgs(OpStateLoad, args, &a); err != nil && !bytes.Contains([]byte(err.Message), []byte(OpStateLoad)) {
			t.Fatalf("args error does not name the op: %v", err)
		}
	})
}
