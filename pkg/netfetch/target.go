package netfetch

import (
	"fmt"
	"strings"

	"github.com/oxios/oxios/pkg/audit"
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
