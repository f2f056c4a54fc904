package audit

import (
	"path"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// Filter turns the selection of an audit.log call into a predicate over
// entries (what the caller may see is the kernel's to judge).
func Filter(a *proto.AuditLogArgs) (func(*Info) bool, *proto.Error) {
	if a.Agent != "" {
		if err := proto.CheckAgent(a.Agent); err != nil {
			return nil, err
		}
	}
	if a.Op != "" {
		if _, err := path.Match(a.Op, ""); err != nil {
			return nil, proto.Errorf(proto.EINVAL, "op pattern %q: %v", a.Op, err)
		}
	}
	since := ""
	if a.SinceTime != "" {
		t, err := time.Parse(time.RFC3339Nano, a.SinceTime)
		if err != nil {
			return nil, proto.Errorf(proto.EINVAL, "since_time %q is not an RFC 3339 time", a.SinceTime)
		}
		// Entry times are fixed-width UTC: they compare as strings.
		since = t.UTC().Format("2006-01-02T15:04:05.000000000Z")
	}
	if a.N < 0 {
		return nil, proto.Errorf(proto.EINVAL, "n must not be negative (got %d)", a.N)
	}
	return func(in *Info) bool {
		if a.Agent != "" && in.Agent() != a.Agent && in.Actor.Agent != a.Agent {
			return false
		}
		if a.Op != "" {
			if ok, _ := path.Match(a.Op, in.Op); !ok {
				return false
			}
		}
		return since == "" || in.Time >= since
	}, nil
}
