package recall

// This file implements the English (Porter2) stemmer of the Snowball project,
// https://snowballstem.org/algorithms/english/stemmer.html, on ASCII bytes.
// Words with non-ASCII letters are returned unchanged: the algorithm is only
// defined for English.

// Stem returns the Porter2 stem of a lowercase word.
func Stem(word string) string {
	if len(word) <= 2 {
		return word
	}
	for i := 0; i < len(word); i++ {
		if word[i] >= 0x80 {
			return word
		}
	}
	if s, ok := stemExceptions1[word]; ok {
		return s
	}
	b := []byte(word)
	if b[0] == '\'' {
		b = b[1:]
	}
	// Mark consonant y as Y: initial y, or y after a vowel.
	for i := range b {
		if b[i] == 'y' && (i == 0 || isVowel(b[i-1])) {
			b[i] = 'Y'
		}
	}
	r1, r2 := regions(b)
	b = step0(b)
	b = step1a(b)
	if _, ok := stemExceptions2[string(b)]; ok {
		return restoreY(b)
	}
	b = step1b(b, r1)
	b = step1c(b)
	b = step2(b, r1)
	b = step3(b, r1, r2)
	b = step4(b, r2)
	b = step5(b, r1, r2)
	return restoreY(b)
}

var stemExceptions1 = map[string]string{
	"skis": "ski", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie",
	"idly": "idl", "gently": "gentl", "ugly": "ugli", "early": "earli", "only": "onli",
	"singly": "singl", "sky": "sky", "news": "news", "howe": "howe", "atlas": "atlas", "cosmos": "cosmos",
	"bias": "bias", "andes": "andes",
}

var stemExceptions2 = map[string]struct{}{
	"inning": {}, "outing": {}, "canning": {}, "herring": {}, "earring": {},
	"proceed": {}, "exceed": {}, "succeed": {},
}

func isVowel(c byte) bool {
	switch c {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}

func restoreY(b []byte) string {
	for i := range b {
		if b[i] == 'Y' {
			b[i] = 'y'
		}
	}
	return string(b)
}

// regions returns the start offsets of R1 and R2.
func regions(b []byte) (int, int) {
	r1 := len(b)
	switch {
	case hasPrefix(b, "gener"), hasPrefix(b, "arsen"):
		r1 = 5
	case hasPrefix(b, "commun"):
		r1 = 6
	default:
		r1 = regionAfter(b, 0)
	}
	return r1, regionAfter(b, r1)
}

// regionAfter returns the offset after the first non-vowel that follows a
// vowel, searching from start.
func regionAfter(b []byte, start int) int {
	for i := start + 1; i < len(b); i++ {
		if !isVowel(b[i]) && isVowel(b[i-1]) {
			return i + 1
		}
	}
	return len(b)
}

func hasPrefix(b []byte, p string) bool {
	return len(b) >= len(p) && string(b[:len(p)]) == p
}

func hasSuffix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[len(b)-len(s):]) == s
}

// shortSyllableAt reports whether b ends, at offset end, with a short syllable.
func endsShortSyllable(b []byte) bool {
	n := len(b)
	if n == 2 {
		return isVowel(b[0]) && !isVowel(b[1])
	}
	if n < 3 {
		return false
	}
	c := b[n-1]
	return !isVowel(b[n-3]) && isVowel(b[n-2]) && !isVowel(c) && c != 'w' && c != 'x' && c != 'Y'
}

func isShortWord(b []byte, r1 int) bool {
	return r1 >= len(b) && endsShortSyllable(b)
}

func containsVowel(b []byte) bool {
	for _, c := range b {
		if isVowel(c) {
			return true
		}
	}
	return false
}

func step0(b []byte) []byte {
	for _, s := range []string{"'s'", "'s", "'"} {
		if hasSuffix(b, s) {
			return b[:len(b)-len(s)]
		}
	}
	return b
}

func step1a(b []byte) []byte {
	switch {
	case hasSuffix(b, "sses"):
		return b[:len(b)-2]
	case hasSuffix(b, "ied"), hasSuffix(b, "ies"):
		if len(b) > 4 {
			return b[:len(b)-2]
		}
		return b[:len(b)-1]
	case hasSuffix(b, "us"), hasSuffix(b, "ss"):
		return b
	case hasSuffix(b, "s"):
		// Delete if the part before the s, excluding the letter just before
		// it, contains a vowel.
		if len(b) >= 3 && containsVowel(b[:len(b)-2]) {
			return b[:len(b)-1]
		}
	}
	return b
}

func step1b(b []byte, r1 int) []byte {
	for _, s := range []string{"eedly", "eed"} {
		if hasSuffix(b, s) {
			if len(b)-len(s) >= r1 {
				return b[:len(b)-len(s)+2]
			}
			return b
		}
	}
	for _, s := range []string{"ingly", "edly", "ing", "ed"} {
		if !hasSuffix(b, s) {
			continue
		}
		stem := b[:len(b)-len(s)]
		if !containsVowel(stem) {
			return b
		}
		switch {
		case hasSuffix(stem, "at"), hasSuffix(stem, "bl"), hasSuffix(stem, "iz"):
			return append(stem, 'e')
		case isDouble(stem):
			return stem[:len(stem)-1]
		case isShortWord(stem, r1):
			return append(stem, 'e')
		}
		return stem
	}
	return b
}

func isDouble(b []byte) bool {
	n := len(b)
	if n < 2 || b[n-1] != b[n-2] {
		return false
	}
	switch b[n-1] {
	case 'b', 'd', 'f', 'g', 'm', 'n', 'p', 'r', 't':
		return true
	}
	return false
}

func step1c(b []byte) []byte {
	n := len(b)
	if n > 2 && (b[n-1] == 'y' || b[n-1] == 'Y') && !isVowel(b[n-2]) {
		b[n-1] = 'i'
	}
	return b
}

type rule struct{ suffix, repl string }

// step2Rules is ordered so that the longest matching suffix comes first.
var step2Rules = []rule{
	{"ization", "ize"}, {"ational", "ate"}, {"fulness", "ful"}, {"ousness", "ous"},
	{"iveness", "ive"}, {"tional", "tion"}, {"biliti", "ble"}, {"lessli", "less"},
	{"entli", "ent"}, {"ation", "ate"}, {"alism", "al"}, {"aliti", "al"},
	{"ousli", "ous"}, {"iviti", "ive"}, {"fulli", "ful"}, {"enci", "ence"},
	{"anci", "ance"}, {"abli", "able"}, {"izer", "ize"}, {"ator", "ate"},
	{"alli", "al"}, {"bli", "ble"}, {"ogi", "og"}, {"li", ""},
}

func step2(b []byte, r1 int) []byte {
	for _, r := range step2Rules {
		if !hasSuffix(b, r.suffix) {
			continue
		}
		stem := b[:len(b)-len(r.suffix)]
		if len(stem) < r1 {
			return b
		}
		switch r.suffix {
		case "ogi":
			if !hasSuffix(stem, "l") {
				return b
			}
		case "li":
			if len(stem) == 0 || !validLiEnding(stem[len(stem)-1]) {
				return b
			}
		}
		return append(stem, r.repl...)
	}
	return b
}

func validLiEnding(c byte) bool {
	switch c {
	case 'c', 'd', 'e', 'g', 'h', 'k', 'm', 'n', 'r', 't':
		return true
	}
	return false
}

var step3Rules = []rule{
	{"ational", "ate"}, {"tional", "tion"}, {"alize", "al"}, {"icate", "ic"},
	{"iciti", "ic"}, {"ative", ""}, {"ical", "ic"}, {"ness", ""}, {"ful", ""},
}

func step3(b []byte, r1, r2 int) []byte {
	for _, r := range step3Rules {
		if !hasSuffix(b, r.suffix) {
			continue
		}
		stem := b[:len(b)-len(r.suffix)]
		if len(stem) < r1 || (r.suffix == "ative" && len(stem) < r2) {
			return b
		}
		return append(stem, r.repl...)
	}
	return b
}

var step4Suffixes = []string{
	"ement", "ance", "ence", "able", "ible", "ment", "ant", "ent", "ism", "ate",
	"iti", "ous", "ive", "ize", "ion", "al", "er", "ic",
}

func step4(b []byte, r2 int) []byte {
	for _, s := range step4Suffixes {
		if !hasSuffix(b, s) {
			continue
		}
		stem := b[:len(b)-len(s)]
		if len(stem) < r2 {
			return b
		}
		if s == "ion" && !(hasSuffix(stem, "s") || hasSuffix(stem, "t")) {
			return b
		}
		return stem
	}
	return b
}

func step5(b []byte, r1, r2 int) []byte {
	n := len(b)
	switch {
	case n > 0 && b[n-1] == 'e':
		stem := b[:n-1]
		if n-1 >= r2 || (n-1 >= r1 && !endsShortSyllable(stem)) {
			return stem
		}
	case n > 1 && b[n-1] == 'l' && b[n-2] == 'l' && n-1 >= r2:
		return b[:n-1]
	}
	return b
}
