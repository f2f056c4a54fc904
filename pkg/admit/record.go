package admit

import (
	"fmt"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// AgentLimit is the runs an agent may have at once: the lower of
// maxPerAgent ([runs] max_per_agent) and polRuns (its policy's
// limits.runs), where 0 is no limit.
func AgentLimit(maxPerAgent, polRuns int) int {
	n := maxPerAgent
	if polRuns > 0 && (n == 0 || polRuns < n) {
		n = polRuns
	}
	return n
}

// Resources is the resources record of runs, with the state of
// admission adm and the host sampled now (host), judged overloaded
// against load and memory (Judge).
func Resources(host proto.Host, adm proto.Admission, runs []proto.RunRecord, load, memory float64) proto.ResourcesRecord {
	rec := proto.ResourcesRecord{Type: proto.RecordResources, Time: time.Now().UTC(), Host: host, Admission: adm, Runs: runs}
	rec.Host.Why = Judge(&rec.Host, load, memory)
	rec.Host.Overloaded = rec.Host.Why != ""
	var cpu float64
	var rss int64
	for _, r := range rec.Runs {
		cpu += r.CPU
		rss += r.RSS
	}
	rec.Text = fmt.Sprintf("%d running, %d queued; load %.2f on %d cores; runs: %.1fs CPU, %d MiB RSS",
		rec.Admission.Running, rec.Admission.Queued, rec.Host.Load1, rec.Host.Cores, cpu, rss>>20)
	return rec
}
