package proto

import (
	"errors"
	"fmt"
	"testing"
)

func TestResult(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{Errorf(ENOENT, "no key"), ENOENT},
		{fmt.Errorf("saving: %w", Errorf(EPERM, "policy")), EPERM},
		{errors.New("disk"), EIO},
	} {
		if got := Result(c.err); got != c.want {
			t.Errorf("Result(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestAsError(t *testing.T) {
	pe := Errorf(ENOSPC, "disk full")
	if got := AsError(fmt.Errorf("writing: %w", pe)); got != pe {
		t.Errorf("AsError of a wrapped *Error = %v, want it unwrapped", got)
	}
	if got := AsError(errors.New("read failed")); got.Code != EIO || got.Message != "read failed" {
		t.Errorf("AsError of a plain error = %+v, want EIO with its words", got)
	}
}
