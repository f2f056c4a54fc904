package audit

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestLines(t *testing.T) {
	var got []string
	w := &Lines{Ctx: context.Background(), Emit: func(b []byte) error { got = append(got, string(b)); return nil }}
	for _, part := range []string{"a\nb", "c\n", "\n", "d"} {
		if n, err := w.Write([]byte(part)); n != len(part) || err != nil {
			t.Fatalf("write %q: %d %v", part, n, err)
		}
	}
	if !slices.Equal(got, []string{"a", "bc", ""}) || string(w.Partial) != "d" {
		t.Errorf("lines %q, partial %q", got, w.Partial)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = &Lines{Ctx: ctx, Emit: func([]byte) error { return nil }}
	if _, err := w.Write([]byte("x\n")); !errors.Is(err, context.Canceled) {
		t.Errorf("after the end: %v", err)
	}
}
