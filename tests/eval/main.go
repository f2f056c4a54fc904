// Command eval measures the quality of memory recall on CISI, the judged
// test collection in ../shared/data/ir/cisi (see its README): it starts a
// real oxiosd from -bin on a temp dir, remembers the 1460 documents as
// memories of one agent, runs the 76 judged queries through the
// mem.recall syscall, and prints MAP and nDCG@10 next to BM25 (k1 1.2,
// b 0.75) computed here on the same tokens (`make eval`).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/recall"
)

func main() {
	binDir := flag.String("bin", "bin", "folder of the built binaries")
	data := flag.String("cisi", "../shared/data/ir/cisi", "folder of the CISI collection")
	flag.Parse()
	if err := run(*binDir, *data); err != nil {
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}

type record struct {
	id     int
	fields map[byte]string
}

// parse reads CISI records strictly: ".I <id>" starts a record, ".X" a
// field that runs until the next line starting with ".".
func parse(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []record
	var field byte
	var buf strings.Builder
	end := func() {
		if field != 0 && len(recs) > 0 {
			recs[len(recs)-1].fields[field] += strings.TrimSpace(buf.String()) + "\n"
		}
		buf.Reset()
		field = 0
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		s := sc.Text()
		if !strings.HasPrefix(s, ".") {
			if field == 0 {
				return nil, fmt.Errorf("%s:%d: text outside a field", path, n)
			}
			buf.WriteString(s + "\n")
			continue
		}
		end()
		if strings.HasPrefix(s, ".I ") {
			id, err := strconv.Atoi(strings.TrimSpace(s[3:]))
			if err != nil {
				return nil, fmt.Errorf("%s:%d: bad id", path, n)
			}
			recs = append(recs, record{id: id, fields: map[byte]string{}})
			continue
		}
		if len(s) < 2 || strings.TrimSpace(s[2:]) != "" || len(recs) == 0 {
			return nil, fmt.Errorf("%s:%d: bad field line %q", path, n, s)
		}
		field = s[1]
	}
	end()
	return recs, sc.Err()
}

func qrels(path string) (map[int]map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rel := map[int]map[string]bool{}
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want 4 fields", path, i+1)
		}
		q, err1 := strconv.Atoi(f[0])
		d, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: bad ids", path, i+1)
		}
		if rel[q] == nil {
			rel[q] = map[string]bool{}
		}
		rel[q][strconv.Itoa(d)] = true
	}
	return rel, nil
}

// bm25 is a plain BM25 ranking over analysed documents.
type bm25 struct {
	docs  []map[string]int
	lens  []int
	ids   []string
	df    map[string]int
	avgdl float64
}

func newBM25(ids []string, texts []string, analyze func(string) []string) *bm25 {
	b := &bm25{ids: ids, df: map[string]int{}}
	total := 0
	for _, t := range texts {
		terms := analyze(t)
		tf := map[string]int{}
		for _, w := range terms {
			tf[w]++
		}
		for w := range tf {
			b.df[w]++
		}
		b.docs = append(b.docs, tf)
		b.lens = append(b.lens, len(terms))
		total += len(terms)
	}
	b.avgdl = float64(total) / float64(len(texts))
	return b
}

func (b *bm25) rank(q []string, k int) []string {
	const k1, bb = 1.2, 0.75
	n := float64(len(b.docs))
	qtf := map[string]int{}
	for _, w := range q {
		qtf[w]++
	}
	type sc struct {
		i int
		s float64
	}
	var out []sc
	for i, d := range b.docs {
		s := 0.0
		for w, qn := range qtf {
			tf := float64(d[w])
			if tf == 0 {
				continue
			}
			df := float64(b.df[w])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			s += float64(qn) * idf * tf * (k1 + 1) / (tf + k1*(1-bb+bb*float64(b.lens[i])/b.avgdl))
		}
		if s > 0 {
			out = append(out, sc{i, s})
		}
	}
	sort.Slice(out, func(x, y int) bool {
		if out[x].s != out[y].s {
			return out[x].s > out[y].s
		}
		return out[x].i < out[y].i
	})
	ids := make([]string, 0, k)
	for _, o := range out[:min(k, len(out))] {
		ids = append(ids, b.ids[o.i])
	}
	return ids
}

// scores returns AP (over the ranking given) and nDCG@10 (binary gains).
func scores(ranked []string, rel map[string]bool) (ap, ndcg float64) {
	found := 0
	for i, id := range ranked {
		if rel[id] {
			found++
			ap += float64(found) / float64(i+1)
			if i < 10 {
				ndcg += 1 / math.Log2(float64(i+2))
			}
		}
	}
	var idcg float64
	for i := 0; i < min(10, len(rel)); i++ {
		idcg += 1 / math.Log2(float64(i+2))
	}
	return ap / float64(len(rel)), ndcg / idcg
}

func run(binDir, dataDir string) error {
	all, err := parse(filepath.Join(dataDir, "CISI.ALL"))
	if err != nil {
		return err
	}
	qry, err := parse(filepath.Join(dataDir, "CISI.QRY"))
	if err != nil {
		return err
	}
	rel, err := qrels(filepath.Join(dataDir, "CISI.REL"))
	if err != nil {
		return err
	}
	queries := map[int]string{}
	for _, r := range qry {
		queries[r.id] = r.fields['W']
	}
	dir, err := os.MkdirTemp("", "oxeval")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	d := exec.Command(filepath.Join(binDir, "oxiosd"), "--config", "", "--data", filepath.Join(dir, "data"), "--socket", sock, "--no-mount", "--log-level", "warn")
	d.Stderr = os.Stderr
	if err := d.Start(); err != nil {
		return err
	}
	defer func() { d.Process.Signal(os.Interrupt); d.Wait() }()
	ctx := context.Background()
	var cl *client.Client
	for i := 0; ; i++ {
		if cl, err = client.Dial(ctx, sock); err == nil {
			break
		}
		if i == 100 {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer cl.Close()

	// Title and abstract are the memory's text; the tag names the document.
	ids := make([]string, len(all))
	texts := make([]string, len(all))
	var in []proto.MemoryInput
	for i, r := range all {
		ids[i], texts[i] = strconv.Itoa(r.id), r.fields['T']+r.fields['W']
		in = append(in, proto.MemoryInput{Kind: "semantic", Text: texts[i], Tags: []string{"cisi:" + ids[i]}})
	}
	if _, err := cl.MemRemember(ctx, proto.MemRememberArgs{Agent: "cisi", Memories: in}); err != nil {
		return err
	}
	search := func(q string, k int) ([]string, error) {
		var out []string
		err := cl.MemRecall(ctx, proto.MemRecallArgs{Agent: "cisi", Query: q, K: k}, func(r proto.MemoryRecord) error {
			for _, t := range r.Tags {
				if id, ok := strings.CutPrefix(t, "cisi:"); ok {
					out = append(out, id)
				}
			}
			return nil
		})
		return out, err
	}
	same := newBM25(ids, texts, recall.Analyze)
	plain := newBM25(ids, texts, recall.Tokenize)
	var m [3][2]float64
	qids := make([]int, 0, len(rel))
	for q := range rel {
		qids = append(qids, q)
	}
	sort.Ints(qids)
	for _, q := range qids {
		text := queries[q]
		top10, err := search(text, 10)
		if err != nil {
			return fmt.Errorf("query %d: %w", q, err)
		}
		long, err := search(text, 1000)
		if err != nil {
			return fmt.Errorf("query %d: %w", q, err)
		}
		ap, _ := scores(long, rel[q])
		_, nd := scores(top10, rel[q])
		m[0][0] += ap
		m[0][1] += nd
		for i, b := range []*bm25{same, plain} {
			an := recall.Analyze
			if i == 1 {
				an = recall.Tokenize
			}
			ap, nd := scores(b.rank(an(text), 1000), rel[q])
			m[i+1][0] += ap
			m[i+1][1] += nd
		}
	}
	n := float64(len(qids))
	fmt.Printf("CISI: %d documents remembered through oxiosd, %d judged queries through mem.recall\n", len(all), len(qids))
	fmt.Printf("%-44s %8s %8s\n", "", "MAP", "nDCG@10")
	fmt.Printf("%-44s %8.4f %8.4f\n", "ox-recall (hybrid)", m[0][0]/n, m[0][1]/n)
	fmt.Printf("%-44s %8.4f %8.4f\n", "BM25, same tokens (stemmed, stop words out)", m[1][0]/n, m[1][1]/n)
	fmt.Printf("%-44s %8.4f %8.4f\n", "BM25, plain tokens (no stemming, no stop)", m[2][0]/n, m[2][1]/n)
	fmt.Printf("nDCG@10 ratio vs same-token BM25: %.3fx (goal 1.10x); vs plain-token BM25: %.3fx\n", m[0][1]/m[1][1], m[0][1]/m[2][1])
	return nil
}
