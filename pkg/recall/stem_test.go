package recall

import "testing"

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
