package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// maxContext bounds the context handed to the model (bytes).
const maxContext = 64 << 10

// FormatContext turns a run's input into text for the model: each line
// that is a record of an ox-* command (ox-recall's memories, ox-state's
// values, a run's output...) becomes a line of its text with what kind of
// record it is; other lines are kept as they are.
func FormatContext(input string) string {
	var b strings.Builder
	for line := range strings.Lines(input) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		b.WriteString(contextLine(line))
		b.WriteByte('\n')
		if b.Len() > maxContext {
			b.WriteString("(the rest of the context was cut)\n")
			break
		}
	}
	return b.String()
}

func contextLine(line string) string {
	t := strings.TrimSpace(line)
	if len(t) < 2 || t[0] != '{' {
		return line
	}
	var r struct {
		Type    string    `json:"type"`
		Kind    string    `json:"kind"`
		Key     string    `json:"key"`
		Text    string    `json:"text"`
		Value   *string   `json:"value"`
		Created time.Time `json:"created"`
		Tags    []string  `json:"tags"`
	}
	if json.Unmarshal([]byte(t), &r) != nil || r.Type == "" {
		return line
	}
	text := r.Text
	if r.Value != nil {
		text = *r.Value
	}
	switch r.Type {
	case "memory":
		s := fmt.Sprintf("- memory (%s", r.Kind)
		if !r.Created.IsZero() {
			s += ", " + r.Created.Format("2006-01-02 15:04")
		}
		if len(r.Tags) > 0 {
			s += ", tags " + strings.Join(r.Tags, ",")
		}
		return s + "): " + text
	case "state":
		return fmt.Sprintf("- state %s: %s", r.Key, text)
	}
	return fmt.Sprintf("- %s: %s", r.Type, text)
}
