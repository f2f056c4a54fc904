package recall

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// maxTokenBytes bounds a token: longer runs of letters (base64, hashes) are
// cut so that one line cannot blow up the vocabulary with huge terms.
const maxTokenBytes = 64

// Tokenize splits text into lowercase words made of Unicode letters and
// digits. Combining marks are dropped and common Latin letters with
// diacritics are folded to their base letter, so "café" written precomposed
// or decomposed gives the same token "cafe". An apostrophe inside a word is
// kept (the stemmer removes the possessive). Invalid UTF-8 bytes separate
// words.
func Tokenize(text string) []string {
	var out []string
	forTokens(text, func(w []byte) { out = append(out, string(w)) })
	return out
}

// forTokens calls fn with each token of text, as Tokenize splits them, in
// a buffer that fn must not keep.
func forTokens(text string, fn func(w []byte)) {
	buf := make([]byte, 0, maxTokenBytes+8)
	flush := func() {
		w := buf
		for len(w) > 0 && w[0] == '\'' {
			w = w[1:]
		}
		for len(w) > 0 && w[len(w)-1] == '\'' {
			w = w[:len(w)-1]
		}
		if len(w) > 0 {
			fn(w)
		}
		buf = buf[:0]
	}
	for i := 0; i < len(text); {
		if c := text[i]; c < utf8.RuneSelf {
			// ASCII, as the switch below has it, without decoding.
			i++
			switch {
			case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
				buf = append(buf, c)
			case c >= 'A' && c <= 'Z':
				buf = append(buf, c+'a'-'A')
			case c == '\'':
				if len(buf) > 0 {
					buf = append(buf, '\'')
				}
			default:
				flush()
			}
			if len(buf) >= maxTokenBytes {
				flush()
			}
			continue
		}
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
			// A combining mark: drop it, keep the base letter.
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

// latinFold maps lowercase Latin-1 and Latin Extended-A letters to ASCII.
var latinFold = map[rune]string{}

func init() {
	groups := map[string]string{
		"a": "àáâãäåāăą", "c": "çćĉċč", "d": "ďđ", "e": "èéêëēĕėęě", "g": "ĝğġģ",
		"h": "ĥħ", "i": "ìíîïĩīĭįı", "j": "ĵ", "k": "ķ", "l": "ĺļľŀł", "n": "ñńņňŉ",
		"o": "òóôõöøōŏő", "r": "ŕŗř", "s": "śŝşš", "t": "ţťŧ", "u": "ùúûüũūŭůűų",
		"w": "ŵ", "y": "ýÿŷ", "z": "źżž", "ae": "æ", "oe": "œ", "ss": "ß", "th": "þ",
	}
	for base, letters := range groups {
		for _, r := range letters {
			latinFold[r] = base
		}
	}
}

// stopWords is a small general English list of function words; it holds no
// collection-specific terms.
var stopWords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be
	because been before being below between both but by can could did do does doing down during each
	few for from further had has have having he her here hers herself him himself his how i if in into
	is it its itself just me more most my myself no nor not now of off on once only or other our ours
	ourselves out over own same she should so some such than that the their theirs them themselves then
	there these they this those through to too under until up very was we were what when where which
	while who whom why will with would you your yours yourself yourselves`) {
		m[w] = struct{}{}
	}
	return m
}()

// Analyze turns text into index terms: tokens without stop words, stemmed.
func Analyze(text string) []string {
	out := make([]string, 0, len(text)/10+4)
	forTokens(text, func(w []byte) {
		if s, ok := term(w); ok {
			out = append(out, s)
		}
	})
	return out
}

// words memoizes the analysis of a token: its stem (Stem), or that it is a
// stop word. Text is Zipfian, a few thousand words make most of it, and
// stemming was most of the cost of analysis; remembers analyse their texts
// side by side, so the words known are read without a lock. frozen is
// never changed once published: the words stemmed since it was made wait
// in fresh (under mu) until there are a quarter as many, then a new frozen
// holds them all, so copies cost O(1) a word. Once the cache holds
// stemCacheMax words (a few MiB) it takes no more: a flood of one-off
// tokens (hashes, numbers) cannot grow it.
var words struct {
	frozen atomic.Pointer[map[string]string]
	mu     sync.Mutex
	fresh  map[string]string
}

// stopMark is a stop word's entry in words: no stem is empty.
const stopMark = ""

const stemCacheMax = 1 << 16

func init() {
	m := make(map[string]string, len(stopWords))
	for w := range stopWords {
		m[w] = stopMark
	}
	words.frozen.Store(&m)
	words.fresh = map[string]string{}
}

// term is w's index term, its stem; ok is false for a stop word.
func term(w []byte) (string, bool) {
	if s, ok := (*words.frozen.Load())[string(w)]; ok {
		return s, s != stopMark
	}
	words.mu.Lock()
	s, ok := words.fresh[string(w)]
	words.mu.Unlock()
	if ok {
		return s, true
	}
	word := string(w)
	s = Stem(word)
	words.mu.Lock()
	defer words.mu.Unlock()
	frozen := *words.frozen.Load()
	if n := len(frozen) + len(words.fresh); n < stemCacheMax {
		words.fresh[word] = s
		if len(words.fresh) >= 64+len(frozen)/4 {
			m := make(map[string]string, n+1)
			for w, s := range frozen {
				m[w] = s
			}
			for w, s := range words.fresh {
				m[w] = s
			}
			words.frozen.Store(&m)
			words.fresh = map[string]string{}
		}
	}
	return s, true
}

// stemWord is Stem(string(w)), through the cache, for a word that is not
// a stop word.
func stemWord(w []byte) string {
	if s, ok := term(w); ok {
		return s
	}
	return Stem(string(w))
}
