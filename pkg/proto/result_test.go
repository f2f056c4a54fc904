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
