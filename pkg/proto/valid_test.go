package proto

import (
	"encoding/json"
	"strings"
	"testing"
)

// Valid says what json.Valid says, for every input.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{"agent":"ops","memories":[{"text":"disk \"full\" \\ \u00e9 \ud83d\ude42","tags":["a"],"importance":0.5}]}`,
		`[1,-0,0.5e+10,1E-3,true,false,null,"",{},[],{"a":{"b":[]}}]`, ` {"a" : 1 , "b":[ 1 , 2 ] } `,
		`01`, `-`, `1.`, `1e`, `.5`, `"\x01"`, `"\u12"`, `"\q"`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `[1 2]`,
		`{"a":1,}`, `tru`, `nul`, `"unterminated`, `{"a":1}}`, `]`, ``, ` `, "\"\xff\xfe\"", `"a\/b"`,
		strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
		strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}

// Short strings over JSON's own alphabet, at random: most are invalid
// near a valid one, where a validator goes wrong.
func TestValidRandom(t *testing.T) {
	const alphabet = `{}[],:"\ u0aAeE+-.19tfnrl /` + "\t\x01\xff"
	r := uint64(1)
	next := func(n int) int {
		r ^= r << 13
		r ^= r >> 7
		r ^= r << 17
		return int(r % uint64(n))
	}
	buf := make([]byte, 0, 16)
	for range 300000 {
		buf = buf[:0]
		for n := next(14); n > 0; n-- {
			buf = append(buf, alphabet[next(len(alphabet))])
		}
		if got, want := Valid(buf), json.Valid(buf); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", buf, got, want)
		}
	}
	// Strings around the 8-byte steps, with each byte of note at each place.
	for n := 0; n < 20; n++ {
		for pos := 0; pos < n; pos++ {
			for _, c := range []byte{'"', '\\', 0x1f, 0x7f, 0x80, 0xff, ' '} {
				s := []byte(`"` + strings.Repeat("a", n) + `"`)
				s[1+pos] = c
				if got, want := Valid(s), json.Valid(s); got != want {
					t.Fatalf("Valid(%q) = %v, json.Valid %v", s, got, want)
				}
			}
		}
	}
}

// BenchmarkValid checks a bulk remember's args (1000 memories of 100
// bytes), against json.Valid.
func BenchmarkValid(b *testing.B) {
	a := MemRememberArgs{Agent: "bench"}
	for range 1000 {
		a.Memories = append(a.Memories, MemoryInput{Text: strings.Repeat("The present study is a history of the DEWEY Decimal ", 2)})
	}
	args, _ := AppendMemRememberArgs(nil, &a)
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{{"proto", Valid}, {"encoding-json", json.Valid}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(args)))
			for range b.N {
				if !v.valid(args) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
