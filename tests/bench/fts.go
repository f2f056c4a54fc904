package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

// The recall anchor: SQLite FTS5 with the porter tokenizer, through a Go
// driver over SQLite's C library with prepared statements (tests/bench/fts5,
// a module of its own so that cgo stays out of the main module; `make
// bench` builds it). The bulk load is one prepared INSERT per line in one
// transaction, until its commit returns (synchronous=FULL, SQLite's
// default: durable, as oxiosd's answer is); its CPU is the anchor
// process's own. Queries go to the same process over a pipe, each timed
// from writing it to reading its last row, like oxiosd's across its
// socket.

var fts5Bin = flag.String("fts5", "", "recall: the FTS5 anchor program (tests/bench/fts5, built by make bench); without it the recall rows have no anchor")

type fts struct {
	bulkRate float64
	bulkCPU  float64 // the anchor's CPU time (user+sys) for the bulk load, s
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
}

// newFTS loads lines into a new FTS5 table under dir and keeps the anchor
// running to answer queries; nil when there is no anchor program.
func newFTS(dir string, lines []string) *fts {
	if *fts5Bin == "" {
		return nil
	}
	src := filepath.Join(dir, "fts5-lines.txt")
	check(os.WriteFile(src, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	f := &fts{cmd: exec.Command(*fts5Bin, "-db", filepath.Join(dir, "fts5.db"), "-lines", src)}
	var err error
	f.in, err = f.cmd.StdinPipe()
	check(err)
	stdout, err := f.cmd.StdoutPipe()
	check(err)
	f.out = bufio.NewReaderSize(stdout, 64<<10)
	f.cmd.Stderr = os.Stderr
	start(f.cmd)
	l, err := f.out.ReadBytes('\n')
	check(err)
	var load struct{ Rate, CPU float64 }
	check(json.Unmarshal(l, &load))
	f.bulkRate, f.bulkCPU = load.Rate, load.CPU
	return f
}

// latency runs the queries (any word may match, bm25 order, top 10 with
// their text) one at a time and returns p50 and p99 in ms.
func (f *fts) latency(qs []string) (p50, p99 float64) {
	if f == nil {
		return 0, 0
	}
	lat := make([]float64, len(qs))
	for i, q := range qs {
		t0 := time.Now()
		_, err := io.WriteString(f.in, strings.ReplaceAll(q, "\n", " ")+"\n")
		check(err)
		for {
			l, err := f.out.ReadSlice('\n')
			check(err)
			if string(l) == "#end\n" {
				break
			}
		}
		lat[i] = float64(time.Since(t0).Microseconds()) / 1000
	}
	return percentiles(lat)
}

func (f *fts) close() {
	if f != nil {
		f.in.Close()
		f.cmd.Wait()
	}
}

// realText returns n lines of the CISI collection's titles and abstracts
// (each line joined with one further on, a different one on each pass, so
// that every line is distinct) and its queries' first 4 keywords (stop
// words left out: FTS5 ranks every row holding "the", which would make
// the row a test of stop words); nil when
// the collection is not there.
func realText(n int) (lines, queries []string) {
	all, err := os.ReadFile(filepath.Join(*cisi, "CISI.ALL"))
	if err != nil {
		return nil, nil
	}
	qry, err := os.ReadFile(filepath.Join(*cisi, "CISI.QRY"))
	if err != nil {
		return nil, nil
	}
	var text []string
	field := ""
	for _, l := range strings.Split(string(all), "\n") {
		if strings.HasPrefix(l, ".") {
			field, _, _ = strings.Cut(l, " ")
			continue
		}
		if l = strings.TrimSpace(l); l != "" && (field == ".T" || field == ".W") {
			text = append(text, l)
		}
	}
	for pass := 1; len(lines) < n; pass++ {
		for i := 0; i < len(text) && len(lines) < n; i++ {
			lines = append(lines, text[i]+" "+text[(i+pass)%len(text)])
		}
	}
	var q []string
	flush := func() {
		var kw []string
		for _, w := range q {
			if w = strings.ToLower(w); len(w) > 2 && !stopWords[w] && len(kw) < 4 {
				kw = append(kw, w)
			}
		}
		if len(kw) > 0 {
			queries = append(queries, strings.Join(kw, " "))
		}
		q = nil
	}
	field = ""
	for _, l := range strings.Split(string(qry), "\n") {
		if strings.HasPrefix(l, ".") {
			if strings.HasPrefix(l, ".I") {
				flush()
			}
			field, _, _ = strings.Cut(l, " ")
			continue
		}
		if field == ".W" {
			q = append(q, strings.FieldsFunc(l, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })...)
		}
	}
	flush()
	return lines, queries
}

// stopWords are left out of the CISI queries, as a user typing keywords
// leaves them out.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`the and are there what how for with from that this which these those can
		any all has have been was were its their they them there about into other such some not
		does did should would could will may might also being between more most than then when where
		who whom why give given use used using based upon`) {
		stopWords[w] = true
	}
}
