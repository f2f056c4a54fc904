package proto

import (
	"math/rand"
	"testing"
	"time"
)

// AppendTime must write what time.RFC3339Nano does, for every time, and
// AppendTimeNano9 what TimeNano9 does.
func TestAppendTimeMatchesRFC3339Nano(t *testing.T) {
	check := func(tm time.Time) {
		t.Helper()
		want := tm.Format(time.RFC3339Nano)
		if got := string(AppendTime([]byte("x"), tm)); got != "x"+want {
			t.Fatalf("%d.%09d %v: got %s want x%s", tm.Unix(), tm.Nanosecond(), tm.Location(), got, want)
		}
		if got, want := string(AppendTimeNano9([]byte("x"), tm)), "x"+tm.Format(TimeNano9); got != want {
			t.Fatalf("%d.%09d %v: nano9 got %s want %s", tm.Unix(), tm.Nanosecond(), tm.Location(), got, want)
		}
		// And back: parseTime reads what UnmarshalText does, or declines.
		var slow time.Time
		serr := slow.UnmarshalText([]byte(want))
		if fast, ok := parseTime([]byte(want)); ok && (serr != nil || fast != slow) {
			t.Fatalf("parseTime(%s) = %v, UnmarshalText: %v %v", want, fast, slow, serr)
		} else if !ok && tm.Location() == time.UTC && tm.Year() >= 0 && tm.Year() <= 9999 {
			t.Fatalf("parseTime declined %s", want)
		}
	}
	edges := []time.Time{
		time.Unix(0, 0), time.Unix(-1, 0), time.Unix(-1, 999999999), time.Unix(86399, 1), time.Unix(86400, 0),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 12, 31, 23, 59, 59, 5, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2000, 2, 29, 12, 0, 0, 100, time.UTC), time.Date(1900, 2, 28, 1, 2, 3, 120000000, time.UTC),
		time.Date(2026, 11, 27, 0, 29, 57, 368622559, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 10, time.UTC),
	}
	for _, tm := range edges {
		check(tm.UTC())
		check(tm.In(time.FixedZone("x", 5400)))
	}
	r := rand.New(rand.NewSource(1))
	for range 200000 {
		// Years about -300 to 4200, and nanoseconds with trailing zeros.
		sec := r.Int63n(140e9) - 72e9
		ns := r.Int63n(1e9)
		if r.Intn(3) == 0 {
			ns -= ns % 1000
		}
		check(time.Unix(sec, ns).UTC())
	}
}

// FuzzParseTime: what parseTime reads, UnmarshalText reads the same.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-11-27T00:29:57.368622559Z", "2026-02-29T00:00:00Z", "2024-02-29T23:59:59.5Z",
		"0000-01-01T00:00:00Z", "9999-12-31T23:59:60Z", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00+01:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fast, ok := parseTime([]byte(s))
		if !ok {
			return
		}
		var slow time.Time
		if err := slow.UnmarshalText([]byte(s)); err != nil || fast != slow {
			t.Fatalf("%q: parseTime %v, UnmarshalText %v %v", s, fast, slow, err)
		}
	})
}

func BenchmarkAppendTime(b *testing.B) {
	tm := time.Date(2026, 11, 27, 0, 29, 57, 368622559, time.UTC)
	buf := make([]byte, 0, 64)
	b.Run("hand", func(b *testing.B) {
		for range b.N {
			buf = AppendTime(buf[:0], tm)
		}
	})
	b.Run("time", func(b *testing.B) {
		for range b.N {
			buf = tm.AppendFormat(buf[:0], time.RFC3339Nano)
		}
	})
}

func BenchmarkParseTime(b *testing.B) {
	s := []byte("2026-11-27T00:29:57.368622559Z")
	b.Run("hand", func(b *testing.B) {
		for range b.N {
			if _, ok := parseTime(s); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("time", func(b *testing.B) {
		var t time.Time
		for range b.N {
			if err := t.UnmarshalText(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
