// Command hostile is a WASM tool that misbehaves on demand, for the
// sandbox's tests: hostile MODE [ARG].
//
//	echo        copy stdin to stdout
//	exit N      exit with status N
//	read PATH   print the file at PATH (/etc/passwd must fail)
//	write PATH  write "hostile" to PATH
//	dial ADDR   open a TCP connection (must fail: no network)
//	loop        never end
//	alloc MIB   allocate and touch MIB mebibytes
//	spew N      write N bytes to stdout
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hostile MODE [ARG]")
		os.Exit(2)
	}
	arg := ""
	if len(os.Args) > 2 {
		arg = os.Args[2]
	}
	switch os.Args[1] {
	case "echo":
		io.Copy(os.Stdout, os.Stdin)
	case "exit":
		n, _ := strconv.Atoi(arg)
		os.Exit(n)
	case "read":
		b, err := os.ReadFile(arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "read:", err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
	case "write":
		if err := os.WriteFile(arg, []byte("hostile"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			os.Exit(1)
		}
	case "dial":
		c, err := net.Dial("tcp", arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
	case "loop":
		n := 0
		for {
			n++
		}
	case "alloc":
		mib, _ := strconv.Atoi(arg)
		var keep [][]byte
		for i := 0; i < mib; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
	case "spew":
		n, _ := strconv.Atoi(arg)
		b := make([]byte, n)
		for i := range b {
			b[i] = 'x'
		}
		os.Stdout.Write(b)
	default:
		fmt.Fprintln(os.Stderr, "hostile: unknown mode", os.Args[1])
		os.Exit(2)
	}
}
