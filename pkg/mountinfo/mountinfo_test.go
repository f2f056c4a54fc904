package mountinfo

import "testing"

func TestParse(t *testing.T) {
	for _, c := range []struct {
		line string
		want Mount
	}{
		{"35 25 0:30 / /sys/fs/cgroup/pids rw,relatime shared:14 - cgroup cgroup rw,pids", Mount{"/sys/fs/cgroup/pids", "cgroup", "rw,pids"}},
		{"30 24 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate", Mount{"/sys/fs/cgroup", "cgroup2", "rw,nsdelegate"}},
		{`40 24 0:26 / /mnt/a\040b rw - fuse.oxios oxios rw,user_id=0`, Mount{"/mnt/a b", "fuse.oxios", "rw,user_id=0"}},
		{`40 24 0:26 / /mnt/end\04 rw - tmpfs t rw`, Mount{`/mnt/end\04`, "tmpfs", "rw"}},
	} {
		got, ok := Parse(c.line)
		if !ok || got != c.want {
			t.Errorf("%q: got %+v %v, want %+v", c.line, got, ok, c.want)
		}
	}
	for _, bad := range []string{"garbage", "1 2 3 4 /x rw - cgroup"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestReadFindsRoot(t *testing.T) {
	if _, ok, err := At("/"); err != nil || !ok {
		t.Fatalf("no mount at /: %v %v", ok, err)
	}
}
