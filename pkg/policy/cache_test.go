package policy

import (
	"errors"
	"testing"
)

func TestCache(t *testing.T) {
	loads := 0
	var fail error
	c := &Cache{Load: func(agent string) (*Policy, error) {
		loads++
		if fail != nil {
			return nil, fail
		}
		return Default(), nil
	}}
	p1, err := c.Get("a")
	if err != nil || p1 == nil {
		t.Fatalf("Get: %v %v", p1, err)
	}
	if p2, _ := c.Get("a"); p2 != p1 || loads != 1 {
		t.Fatalf("second Get loaded again (loads %d)", loads)
	}
	c.Drop("a")
	fail = errors.New("unreadable")
	if _, err := c.Get("a"); err == nil || loads != 2 {
		t.Fatalf("Get after Drop: err %v, loads %d", err, loads)
	}
	fail = nil
	if _, err := c.Get("a"); err != nil || loads != 3 {
		t.Fatalf("a failed load was kept: err %v, loads %d", err, loads)
	}
}

func TestCacheBound(t *testing.T) {
	var fail error
	c := &Cache{Load: func(agent string) (*Policy, error) {
		if fail != nil {
			return nil, fail
		}
		return Parse([]byte("[state]\nread = [\"pub/**\"]\n"))
	}}
	if c.Bound("a", true, (*Policy).Readable) != nil {
		t.Error("the admin is bound")
	}
	r := c.Bound("a", false, (*Policy).Readable)
	if r == nil || !r("pub/x") || r("secret") {
		t.Error("the policy's keys")
	}
	fail = errors.New("unreadable")
	if r := c.Bound("b", false, (*Policy).Readable); r == nil || r("pub/x") {
		t.Error("a policy that does not load shows something")
	}
}
