package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schema is a JSON Schema the final answer of a run must match
// (ox-spawn --schema FILE): sent to the endpoint as the answer's format
// (OpenAI's response_format, which llama-server takes too) and checked
// against the answer, which then is the run's result record.
type Schema struct {
	raw json.RawMessage
	rs  *jsonschema.Resolved
}

// ParseSchema reads a JSON Schema (draft 2020-12 or draft-07).
func ParseSchema(b []byte) (*Schema, error) {
	b = bytes.TrimSpace(b)
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %v", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the schema: %v", err)
	}
	return &Schema{raw: json.RawMessage(b), rs: rs}, nil
}

// Raw is the schema as given.
func (s *Schema) Raw() json.RawMessage { return s.raw }

// Check returns the answer as the JSON value it holds (compacted), or why
// it does not match. A model's habit of fencing JSON (```json ... ```) is
// forgiven; any other text around the value is not.
func (s *Schema) Check(answer string) (json.RawMessage, error) {
	t := strings.TrimSpace(answer)
	if strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6 {
		t = strings.TrimSpace(t[3 : len(t)-3])
		t = strings.TrimSpace(strings.TrimPrefix(t, "json"))
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("the answer holds more than one JSON value")
	}
	// The validator takes the values encoding/json makes (float64, not
	// json.Number): decode again now that the text is known to be one value.
	var plain any
	if err := json.Unmarshal([]byte(t), &plain); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %v", err)
	}
	if err := s.rs.Validate(plain); err != nil {
		return nil, fmt.Errorf("the answer does not match the schema: %v", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, []byte(t)); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
