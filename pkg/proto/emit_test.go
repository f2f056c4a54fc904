package proto

import (
	"errors"
	"testing"
)

func TestEmitAll(t *testing.T) {
	var got []int
	if err := EmitAll([]int{1, 2, 3}, func(v *int) error { got = append(got, *v); return nil }); err != nil || len(got) != 3 || got[2] != 3 {
		t.Fatal(got, err)
	}
	stop := errors.New("stop")
	got = nil
	err := EmitAll([]int{1, 2, 3}, func(v *int) error {
		got = append(got, *v)
		if *v == 2 {
			return stop
		}
		return nil
	})
	if err != stop || len(got) != 2 {
		t.Fatal(got, err)
	}
	if err := EmitAll[int](nil, func(*int) error { return stop }); err != nil {
		t.Fatal(err)
	}
}
