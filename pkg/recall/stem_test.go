package recall

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
)

// Pairs from the Snowball project's English vocabulary and output
// (snowballstem/snowball-data, english/diffs.txt) plus the algorithm's
// documented exceptions.
var stemPairs = map[string]string{
	"consign": "consign", "consigned": "consign", "consigning": "consign", "consignment": "consign",
	"consistency": "consist", "consistently": "consist", "consolation": "consol",
	"consolatory": "consolatori", "console": "consol", "consolidate": "consolid",
	"consolingly": "consol", "consonant": "conson", "conspicuous": "conspicu",
	"conspiracy": "conspiraci", "conspirator": "conspir", "constable": "constabl",
	"constance": "constanc", "constancy": "constanc", "constantly": "constant",
	"constellations": "constel", "consternation": "constern", "constituencies": "constitu",
	"constitute": "constitut", "constitutional": "constitut", "constitutionally": "constitut",
	"constraint": "constraint", "construe": "constru", "consumedly": "consum",
	"consummate": "consumm", "consumption": "consumpt", "contagious": "contagi",
	"contamination": "contamin", "contemplative": "contempl", "contemporaneousness": "contemporan",
	"contemporaries": "contemporari", "contemptible": "contempt", "contemptuously": "contemptu",
	"contentious": "contenti", "contentment": "content", "continent": "contin",
	"continental": "continent", "contingencies": "conting", "continual": "continu",
	"continuance": "continu", "contradictory": "contradictori", "contrairy": "contrairi",
	"contrarieties": "contrarieti", "contrees": "contre", "contributors": "contributor",
	"contrivance": "contriv", "controlled": "control", "controlling": "control",
	"contumelious": "contumeli", "contumely": "contum", "convalescence": "convalesc",
	"conventionalities": "convent", "conventual": "conventu", "conversationally": "convers",
	"conveyancer": "conveyanc", "convivial": "convivi", "conviviality": "convivi",
	"convolvulus": "convolvulus", "coodle": "coodl", "cooing": "coo", "cookery": "cookeri",
	"cooler": "cooler", "coolest": "coolest", "coolly": "coolli", "coolness": "cool",
	"cophias": "cophia", "copied": "copi", "copies": "copi", "coping": "cope",
	"copiously": "copious", "coppery": "copperi", "copse": "cops", "copy": "copi",
	"coquettish": "coquettish", "corallines": "corallin", "cordage": "cordag",
	"cordiality": "cordial", "corduroy": "corduroy", "coriaceous": "coriac",
	"cornwall": "cornwal", "coronal": "coron", "corporeal": "corpor", "corps": "corp",
	"corpse": "corps", "corpulence": "corpul", "corpus": "corpus", "corrective": "correct",
	"correctness": "correct", "correspondingly": "correspond", "corroboratory": "corroboratori",
	"corrugated": "corrug", "cosily": "cosili", "costermongers": "costermong",
	"costlier": "costlier", "costly": "cost", "cosy": "cosi", "cottagers": "cottag",
	// Documented exceptions and short words.
	"skies": "sky", "dying": "die", "news": "news", "gently": "gentl", "only": "onli",
	"succeeded": "succeed", "proceed": "proceed", "by": "by", "say": "say",
	"generously": "generous", "communication": "communic", "hopping": "hop",
	"hoping": "hope", "ties": "tie", "cries": "cri", "gas": "gas", "gaps": "gap",
	"kiwis": "kiwi", "dewey's": "dewey", "agreed": "agre", "feed": "feed",
	"retrieval": "retriev", "retrieving": "retriev", "libraries": "librari",
	"classification": "classif", "information": "inform", "indexing": "index",
}

func TestStem(t *testing.T) {
	for w, want := range stemPairs {
		if got := Stem(w); got != want {
			t.Errorf("Stem(%q) = %q, want %q", w, got, want)
		}
	}
}

func TestTokenize(t *testing.T) {
	got := Tokenize("Café CAFE\u0301 naïve, x1 don't 'quoted' \xff bad")
	want := []string{"cafe", "cafe", "naive", "x1", "don't", "quoted", "bad"}
	if len(got) != len(want) {
		t.Fatalf("Tokenize = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Tokenize = %q, want %q", got, want)
		}
	}
}

// The proximity signal stems only the words whose first byte starts a
// query stem (pairSet.count): a stem must keep its word's first byte.
func TestStemKeepsFirstByte(t *testing.T) {
	words := []string{"yelling", "young", "dying", "lying", "tying", "skies", "idly", "ugly", "e", "ye"}
	for w := range stemPairs {
		words = append(words, w)
	}
	c := loadCISI(t)
	for _, d := range c.docs {
		words = append(words, Tokenize(d.Text)...)
	}
	for _, w := range words {
		if s := Stem(w); s == "" || s[0] != w[0] {
			t.Errorf("Stem(%q) = %q: the first byte changed", w, s)
		}
	}
}

// forTokensByRune is forTokens as it was before its ASCII path: every
// rune decoded and classified (the reference FuzzTokenize holds it to).
func forTokensByRune(text string, fn func(w []byte)) {
	buf := make([]byte, 0, maxTokenBytes+8)
	flush := func() {
		w := bytes.Trim(buf, "'")
		if len(w) > 0 {
			fn(w)
		}
		buf = buf[:0]
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case r == utf8.RuneError && size <= 1:
			flush()
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9'):
			buf = append(buf, byte(r))
		case r < 0x80 && r >= 'A' && r <= 'Z':
			buf = append(buf, byte(r)+'a'-'A')
		case r == '\'' || r == '\u2019':
			if len(buf) > 0 {
				buf = append(buf, '\'')
			}
		case unicode.Is(unicode.Mn, r):
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			r = unicode.ToLower(r)
			if f, ok := latinFold[r]; ok {
				buf = append(buf, f...)
			} else {
				buf = utf8.AppendRune(buf, r)
			}
		default:
			flush()
		}
		if len(buf) >= maxTokenBytes {
			flush()
		}
	}
	flush()
}

func FuzzTokenize(f *testing.F) {
	f.Add("Café CAFE\u0301 naïve, x1 don't 'quoted' \xff bad")
	f.Add(strings.Repeat("a", 70) + "'b ÆØÅ z\u2019s")
	f.Add("The 2 Libraries' catalogues; e-mail\tand\nso-on")
	f.Fuzz(func(t *testing.T, text string) {
		var got, want []string
		forTokens(text, func(w []byte) { got = append(got, string(w)) })
		forTokensByRune(text, func(w []byte) { want = append(want, string(w)) })
		if !slices.Equal(got, want) {
			t.Fatalf("%q: tokens %q, want %q", text, got, want)
		}
		for _, w := range got {
			s, ok := term([]byte(w))
			_, stop := stopWords[w]
			if ok == stop || ok && s != Stem(w) {
				t.Fatalf("%q: term %q %v, want %q (stop word: %v)", w, s, ok, Stem(w), stop)
			}
		}
	})
}

// The word cache gives Stem's answer while it grows and is replaced
// under readers (run with -race), and stop words stay stop words.
func TestTermCache(t *testing.T) {
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				w := fmt.Sprintf("running%dings", i*4+g)
				if s, ok := term([]byte(w)); !ok || s != Stem(w) {
					t.Errorf("term(%q) = %q, %v; want %q", w, s, ok, Stem(w))
					return
				}
				if s, ok := term([]byte("the")); ok {
					t.Errorf("term(the) = %q, not a stop word", s)
					return
				}
			}
		}()
	}
	wg.Wait()
	words.mu.Lock()
	frozen, fresh := len(*words.frozen.Load()), len(words.fresh)
	words.mu.Unlock()
	// The fresh words wait for a quarter of the frozen ones.
	if frozen+fresh < 12000 || fresh > 64+frozen/4 {
		t.Errorf("the cache holds %d frozen and %d fresh words after 12,000 new ones", frozen, fresh)
	}
}

// Prepare counts each distinct term once, in the order they first come,
// in short texts (the table) and long ones (the map) alike.
func TestPrepareCounts(t *testing.T) {
	for _, text := range []string{
		"libraries library librarian the catalogue catalogues and a library",
		strings.Repeat("catalog indexing indexes retrieval of the documents ", 30),
		strings.Repeat("x ", 200) + "y",
	} {
		all := Analyze(text)
		p := Prepare(Doc{ID: "d", Text: text})
		if int(p.length) != len(all) {
			t.Fatalf("%q: length %d, %d terms", text, p.length, len(all))
		}
		var flat []string
		for i, s := range p.terms {
			if slices.Contains(p.terms[:i], s) {
				t.Fatalf("%q: %q comes twice in %q", text, s, p.terms)
			}
			for range p.counts[i] {
				flat = append(flat, s)
			}
		}
		slices.Sort(flat)
		slices.Sort(all)
		if !slices.Equal(flat, all) {
			t.Fatalf("%q: terms %q counts %v, analysis %q", text, p.terms, p.counts, all)
		}
		if first := Analyze(text)[0]; p.terms[0] != first {
			t.Fatalf("%q: first term %q, want %q", text, p.terms[0], first)
		}
	}
}
