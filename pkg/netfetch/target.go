package netfetch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Method is the method a fetch asks for, upper case; "" is GET.
func Method(m string) string {
	if m = strings.ToUpper(m); m == "" {
		return proto.MethodGet
	}
	return m
}

// Target is the target of a fetch's audit entry: the agent, the URL (and
// the method unless GET), and what came of it.
func Target(agent, method, rawURL, outcome string) string {
	what := audit.Clip(rawURL, audit.MaxTarget)
	if method != "" && method != proto.MethodGet {
		what = method + " " + what
	}
	return agent + ":fetch " + what + outcome
}

// Outcome says what came of the fetch rec: its status and size, whether
// its body was cut, and the URL it ended at when redirected.
func Outcome(rec *proto.FetchRecord) string {
	outcome := fmt.Sprintf(" => status %d bytes %d", rec.Status, rec.Bytes)
	if rec.Truncated {
		outcome += " (truncated)"
	}
	if rec.FinalURL != rec.URL {
		outcome += " from " + audit.Clip(rec.FinalURL, audit.MaxTarget)
	}
	return outcome
}

// Failure is what a failed Fetch answers: its error, and the outcome its
// refusal is audited with: the rule of a policy's refusal, or how the
// network failed. A bad request (EINVAL) is not audited: "".
func Failure(err error) (*proto.Error, string) {
	if d := policy.AsDenied(err); d != nil {
		return d.Refused("fetch"), " [" + d.Rule + "]"
	}
	var pe *proto.Error
	if errors.As(err, &pe) && pe.Code == proto.EINVAL {
		return pe, ""
	}
	pe = Error(err)
	return pe, " => " + pe.Code
}

// Finish makes rec, fetched by run of agent, a record: its type, whose
// it is and its text; and returns the record subscribers get (without
// the body) and the target of its audit entry.
func Finish(rec *proto.FetchRecord, agent, run, method, rawURL string) (proto.FetchRecord, string) {
	rec.Type, rec.Agent, rec.Run = proto.RecordFetch, agent, run
	outcome := Outcome(rec)
	rec.Text = strings.TrimPrefix(Target("", method, rawURL, outcome), ":fetch ")
	ev := *rec
	ev.Body, ev.Encoding = "", ""
	return ev, Target(agent, method, rawURL, outcome+" body "+rec.Digest[:16])
}
