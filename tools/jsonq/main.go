// Command jsonq is an Oxios WASM tool that picks values out of a JSON
// document with a path expression.
//
//	jsonq [-r] PATH < document.json
//	jsonq < request.json   (request: {"path": PATH, "data": DOCUMENT, "raw": false})
//
// A path is a chain of steps after a leading ".": .name, ["any name"],
// [N] (from the end when negative) and [] (each element of an array or
// each value of an object). "." alone is the whole document. Each result
// is printed as one line of JSON; with -r (or "raw": true) a string is
// printed as it is. Exit status: 0 with results, 1 when the path leads
// nowhere, 2 for a bad path or bad JSON.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// step is one step of a path: a key, an index, or each element.
type step struct {
	key   string
	index int
	kind  byte // 'k' key, 'i' index, 'e' each
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	raw := false
	if len(args) > 0 && args[0] == "-r" {
		raw, args = true, args[1:]
	}
	in, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "jsonq:", err)
		return 2
	}
	var path string
	var doc any
	switch len(args) {
	case 0:
		var req struct {
			Path string          `json:"path"`
			Data json.RawMessage `json:"data"`
			Raw  bool            `json:"raw"`
		}
		if err := json.Unmarshal(in, &req); err != nil || len(req.Data) == 0 {
			fmt.Fprintln(stderr, `jsonq: usage: jsonq [-r] PATH < doc.json, or {"path": PATH, "data": DOC} on stdin`)
			return 2
		}
		path, raw = req.Path, raw || req.Raw
		in = req.Data
	case 1:
		path = args[0]
	default:
		fmt.Fprintln(stderr, "jsonq: usage: jsonq [-r] PATH < doc.json")
		return 2
	}
	if path == "" {
		path = "."
	}
	steps, err := parse(path)
	if err != nil {
		fmt.Fprintln(stderr, "jsonq:", err)
		return 2
	}
	d := json.NewDecoder(bytes.NewReader(in))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		fmt.Fprintln(stderr, "jsonq: input is not JSON:", err)
		return 2
	}
	out, err := eval(doc, steps)
	if err != nil {
		fmt.Fprintln(stderr, "jsonq:", err)
		return 1
	}
	for _, v := range out {
		if s, ok := v.(string); ok && raw {
			fmt.Fprintln(stdout, s)
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			fmt.Fprintln(stderr, "jsonq:", err)
			return 2
		}
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return 0
}

// parse reads a path such as .items[0].name or .["a b"][].
func parse(p string) ([]step, error) {
	if !strings.HasPrefix(p, ".") && !strings.HasPrefix(p, "[") {
		return nil, fmt.Errorf("path %q: want it to start with . or [", p)
	}
	var steps []step
	for i := 0; i < len(p); {
		switch p[i] {
		case '.':
			i++
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			if j > i {
				steps = append(steps, step{kind: 'k', key: p[i:j]})
			} else if j < len(p) && p[j] == '.' {
				return nil, fmt.Errorf("path %q: empty step at %d", p, i)
			}
			i = j
		case '[':
			end := strings.IndexByte(p[i:], ']')
			if p[i+1:] != "" && p[i+1] == '"' {
				// A quoted key may hold ']': read the JSON string.
				d := json.NewDecoder(strings.NewReader(p[i+1:]))
				var key string
				if err := d.Decode(&key); err != nil {
					return nil, fmt.Errorf("path %q: bad quoted key at %d", p, i)
				}
				j := i + 1 + int(d.InputOffset())
				if j >= len(p) || p[j] != ']' {
					return nil, fmt.Errorf("path %q: want ] at %d", p, j)
				}
				steps = append(steps, step{kind: 'k', key: key})
				i = j + 1
				continue
			}
			if end < 0 {
				return nil, fmt.Errorf("path %q: [ without ]", p)
			}
			in := strings.TrimSpace(p[i+1 : i+end])
			if in == "" {
				steps = append(steps, step{kind: 'e'})
			} else {
				n, err := strconv.Atoi(in)
				if err != nil {
					return nil, fmt.Errorf("path %q: %q is not an index", p, in)
				}
				steps = append(steps, step{kind: 'i', index: n})
			}
			i += end + 1
		default:
			return nil, fmt.Errorf("path %q: unexpected %q at %d", p, p[i], i)
		}
	}
	return steps, nil
}

var errNowhere = errors.New("path leads nowhere")

// eval applies steps to v; [] fans out.
func eval(v any, steps []step) ([]any, error) {
	cur := []any{v}
	for n, s := range steps {
		var next []any
		for _, c := range cur {
			switch s.kind {
			case 'k':
				m, ok := c.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("step %d (.%s): %s is not an object", n+1, s.key, kind(c))
				}
				x, ok := m[s.key]
				if !ok {
					return nil, fmt.Errorf("step %d: no key %q: %w", n+1, s.key, errNowhere)
				}
				next = append(next, x)
			case 'i':
				a, ok := c.([]any)
				if !ok {
					return nil, fmt.Errorf("step %d ([%d]): %s is not an array", n+1, s.index, kind(c))
				}
				i := s.index
				if i < 0 {
					i += len(a)
				}
				if i < 0 || i >= len(a) {
					return nil, fmt.Errorf("step %d: index %d out of %d: %w", n+1, s.index, len(a), errNowhere)
				}
				next = append(next, a[i])
			case 'e':
				switch x := c.(type) {
				case []any:
					next = append(next, x...)
				case map[string]any:
					keys := make([]string, 0, len(x))
					for k := range x {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					for _, k := range keys {
						next = append(next, x[k])
					}
				default:
					return nil, fmt.Errorf("step %d ([]): %s is not an array or object", n+1, kind(c))
				}
			}
		}
		cur = next
	}
	return cur, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}
