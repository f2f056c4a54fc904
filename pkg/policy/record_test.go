package policy

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

func TestLoad(t *testing.T) {
	p, text, err := Load("a", func() ([]byte, error) { return nil, proto.Errorf(proto.ENOENT, "no key") })
	if err != nil || text != nil || p == nil {
		t.Fatalf("no file: the default policy, no text (%v, %q, %v)", p, text, err)
	}
	_, _, err = Load("a", func() ([]byte, error) { return nil, errors.New("disk") })
	if pe := proto.AsError(err); pe.Code != proto.EIO {
		t.Fatalf("a failed read: %v", err)
	}
	_, _, err = Load("a", func() ([]byte, error) { return []byte("[signals]\non_violation = \"maybe\"\n"), nil })
	if pe := proto.AsError(err); pe.Code != proto.EIO || !strings.Contains(pe.Message, `agent "a": its policy file: `) {
		t.Fatalf("a policy that does not parse: %v", err)
	}
	own := DefaultText()
	p, text, err = Load("a", func() ([]byte, error) { return own, nil })
	if err != nil || p == nil || string(text) != string(own) {
		t.Fatalf("an own file: %v %q %v", p, text, err)
	}
}

func TestRecord(t *testing.T) {
	rec := Record("a", nil)
	if rec.Source != "default" || rec.Text != string(DefaultText()) || rec.Digest != audit.ArgsDigest(DefaultText()) || rec.Type != proto.RecordPolicy || rec.Agent != "a" {
		t.Fatalf("default: %+v", rec)
	}
	if rec = Record("a", []byte("x")); rec.Source != "file" || rec.Text != "x" {
		t.Fatalf("file: %+v", rec)
	}
}

type offender struct {
	recs   []any
	sigs   []syscall.Signal
	reason string
}

func (o *offender) Emit(rec any)                    { o.recs = append(o.recs, rec) }
func (o *offender) Signal(sig syscall.Signal) error { o.sigs = append(o.sigs, sig); return nil }
func (o *offender) End(reason string)               { o.reason = reason }

func TestViolation(t *testing.T) {
	d := &Denied{Rule: "state.write", Reason: "may not write x"}
	for _, c := range []struct {
		on        string
		recs, sig int
		end       string
	}{
		{ViolationDeny, 0, 0, ""},
		{ViolationStop, 1, 1, ""},
		{ViolationKill, 0, 0, "ended for a policy violation: may not write x (policy rule state.write)"},
	} {
		p := Default()
		p.Signals.OnViolation = c.on
		var o offender
		Violation(p, d, "a", "r1", &o)
		if len(o.recs) != c.recs || len(o.sigs) != c.sig || o.reason != c.end {
			t.Fatalf("%s: %+v", c.on, o)
		}
		if c.on == ViolationStop {
			e := o.recs[0].(*proto.ErrorRecord)
			if o.sigs[0] != syscall.SIGSTOP || e.Code != proto.EPERM || e.Run != "r1" || !strings.HasSuffix(e.Text, "(policy rule state.write); ox-kill -s CONT or -s KILL r1") {
				t.Fatalf("stop: %+v %v", e, o.sigs)
			}
		}
	}
}

func TestReadable(t *testing.T) {
	p := Default()
	p.State.Read = []string{"**"}
	if p.Readable() != nil {
		t.Fatal("state.read ** reads everything: no filter")
	}
	p.State.Read = []string{"pub/**"}
	r := p.Readable()
	if r == nil || !r("pub/x") || r("secret") {
		t.Fatal("state.read pub/** shows pub/x only")
	}
}
