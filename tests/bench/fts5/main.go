// Command fts5 is the recall rows' anchor: SQLite FTS5 (the porter
// tokenizer) through a Go driver over SQLite's C library, with prepared
// statements, as an application that embeds SQLite would use it.
//
// It is a module of its own so that cgo and SQLite's C source stay out of
// the main module's build and tests: `make bench` builds it (it needs a C
// compiler) and tests/bench runs it.
//
//	fts5 -db FILE -lines FILE
//
// loads every line of -lines into a new FTS5 table in one transaction
// (one prepared INSERT, synchronous=FULL, SQLite's default, so the commit
// is durable as oxiosd's answers are) and prints one JSON line: the lines
// a second until the commit returned, and the process's CPU seconds for
// it. Then it answers queries, one a line on stdin (words; any may
// match), with the top 10 rows by bm25 (rowid and text, a line each) and
// a line "#end", through one prepared SELECT.
package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode"

	_ "github.com/mattn/go-sqlite3"
)

func main() {
	dbPath := flag.String("db", "", "the database file to make (must not exist)")
	linesPath := flag.String("lines", "", "the file of lines to load, one a line")
	flag.Parse()
	if *dbPath == "" || *linesPath == "" {
		fatal(fmt.Errorf("usage: fts5 -db FILE -lines FILE"))
	}
	data, err := os.ReadFile(*linesPath)
	check(err)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	db, err := sql.Open("sqlite3", "file:"+*dbPath+"?_sync=FULL")
	check(err)
	db.SetMaxOpenConns(1)
	_, err = db.Exec("CREATE VIRTUAL TABLE m USING fts5(body, tokenize='porter')")
	check(err)

	cpu0 := cpuTime()
	t0 := time.Now()
	tx, err := db.Begin()
	check(err)
	ins, err := tx.Prepare("INSERT INTO m(body) VALUES(?)")
	check(err)
	for _, l := range lines {
		_, err := ins.Exec(l)
		check(err)
	}
	check(ins.Close())
	check(tx.Commit())
	took := time.Since(t0)
	out := bufio.NewWriter(os.Stdout)
	check(json.NewEncoder(out).Encode(map[string]float64{
		"rate": float64(len(lines)) / took.Seconds(),
		"cpu":  cpuTime() - cpu0,
	}))
	check(out.Flush())

	q, err := db.Prepare("SELECT rowid, body FROM m WHERE m MATCH ? ORDER BY rank LIMIT 10")
	check(err)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	for in.Scan() {
		var terms []string
		for _, w := range strings.FieldsFunc(in.Text(), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			terms = append(terms, `"`+w+`"`)
		}
		if len(terms) > 0 {
			rows, err := q.Query(strings.Join(terms, " OR "))
			check(err)
			for rows.Next() {
				var id int64
				var body string
				check(rows.Scan(&id, &body))
				fmt.Fprintf(out, "%d\t%s\n", id, body)
			}
			check(rows.Err())
		}
		fmt.Fprintln(out, "#end")
		check(out.Flush())
	}
	check(in.Err())
}

// cpuTime is the process's user and system CPU time, in seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func check(err error) {
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "fts5:", err)
	os.Exit(1)
}
