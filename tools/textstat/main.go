// Command textstat is an Oxios WASM tool that counts a text: lines,
// words, characters, bytes, sentences, distinct words and the most
// frequent words.
//
//	textstat [-top N] < text
//	textstat < request.json   (request: {"text": TEXT, "top": N})
//
// With no args, an input that is a JSON object with a "text" string is a
// request; any other input is the text. Words are runs of letters,
// digits, apostrophes and hyphens, counted lowercased. The answer is one
// JSON object. Exit status 2 for bad args.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Stats is textstat's answer.
type Stats struct {
	Lines         int     `json:"lines"`
	Words         int     `json:"words"`
	Chars         int     `json:"chars"`
	Bytes         int     `json:"bytes"`
	Sentences     int     `json:"sentences"`
	DistinctWords int     `json:"distinct_words"`
	AvgWordLength float64 `json:"avg_word_length"`
	LongestWord   string  `json:"longest_word,omitempty"`
	TopWords      []Count `json:"top_words"`
}

// Count is a word and how often it occurs.
type Count struct {
	Word  string `json:"word"`
	Count int    `json:"count"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	top := 10
	switch {
	case len(args) == 0:
	case len(args) == 2 && args[0] == "-top":
		n, err := strconv.Atoi(args[1])
		if err != nil || n < 0 {
			fmt.Fprintln(stderr, "textstat: -top wants a count")
			return 2
		}
		top = n
	default:
		fmt.Fprintln(stderr, "textstat: usage: textstat [-top N] < text")
		return 2
	}
	in, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintln(stderr, "textstat:", err)
		return 2
	}
	text := string(in)
	if len(args) == 0 {
		var req struct {
			Text *string `json:"text"`
			Top  *int    `json:"top"`
		}
		if json.Unmarshal(in, &req) == nil && req.Text != nil {
			text = *req.Text
			if req.Top != nil && *req.Top >= 0 {
				top = *req.Top
			}
		}
	}
	b, _ := json.MarshalIndent(count(text, top), "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

func count(text string, top int) Stats {
	s := Stats{Bytes: len(text), Chars: utf8.RuneCountInString(text), TopWords: []Count{}}
	s.Lines = strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		s.Lines++
	}
	freq := map[string]int{}
	letters := 0
	inSentence := false
	words := strings.FieldsFunc(text, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '-')
	})
	for _, r := range text {
		switch {
		case r == '.' || r == '!' || r == '?':
			if inSentence {
				s.Sentences++
			}
			inSentence = false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			inSentence = true
		}
	}
	if inSentence {
		s.Sentences++
	}
	for _, w := range words {
		w = strings.Trim(strings.ToLower(w), "'-")
		if w == "" {
			continue
		}
		s.Words++
		n := utf8.RuneCountInString(w)
		letters += n
		if n > utf8.RuneCountInString(s.LongestWord) {
			s.LongestWord = w
		}
		freq[w]++
	}
	s.DistinctWords = len(freq)
	if s.Words > 0 {
		s.AvgWordLength = float64(int(float64(letters)/float64(s.Words)*100+0.5)) / 100
	}
	for w, c := range freq {
		s.TopWords = append(s.TopWords, Count{w, c})
	}
	sort.Slice(s.TopWords, func(i, j int) bool {
		a, b := s.TopWords[i], s.TopWords[j]
		return a.Count > b.Count || a.Count == b.Count && a.Word < b.Word
	})
	if len(s.TopWords) > top {
		s.TopWords = s.TopWords[:top]
	}
	return s
}
