// Command fakellm serves a scripted OpenAI-compatible endpoint (the
// llmtest server) for the demo and for trying ox-agent by hand. It prints
// its base URL on the first line of stdout, then serves until SIGINT or
// SIGTERM.
//
//	fakellm [-listen 127.0.0.1:0] -script turns.json
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "`ADDR` to listen on")
	script := flag.String("script", "", "`FILE`: a JSON array of turns (see pkg/llm/llmtest)")
	flag.Parse()
	if *script == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: fakellm [-listen ADDR] -script FILE")
		os.Exit(2)
	}
	turns, err := llmtest.ReadScript(*script)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
	s, err := llmtest.Listen(*listen, turns...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
	fmt.Println(s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.Close()
	fmt.Fprintf(os.Stderr, "fakellm: %d requests answered\n", len(s.Requests()))
}
