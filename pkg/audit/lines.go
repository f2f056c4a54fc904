package audit

import (
	"bytes"
	"context"
)

// Lines is an io.Writer that hands each complete line written to it,
// without its newline, to Emit, until Ctx ends (Export into a stream of
// lines). What is left after the last newline stays in Partial.
type Lines struct {
	Ctx     context.Context
	Emit    func([]byte) error
	Partial []byte
}

func (w *Lines) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.Partial = append(w.Partial, p...)
			break
		}
		line := p[:i]
		if len(w.Partial) > 0 {
			w.Partial = append(w.Partial, line...)
			line = w.Partial
		}
		if err := w.Ctx.Err(); err != nil {
			return 0, err
		}
		if err := w.Emit(line); err != nil {
			return 0, err
		}
		w.Partial = w.Partial[:0]
		p = p[i+1:]
	}
	return n, nil
}
