// Command fleet-keys makes the keys of an oxios fleet (oxiosd(8), Fleet):
// for each host named, a NATS user nkey whose seed goes to that host's
// /etc/oxios/fleet.nk, and prints what the configs need: the users of the
// NATS servers' authorization block, and each host's [fleet.peers].
//
//	go run ./contrib/fleet/fleet-keys -out keys h1 h2 h3
//
// Each node's key is both its NATS user (the servers let in only these
// users, each with the permissions of a node of its name: its own
// subjects, fleet.Permissions) and the key that signs its calls and
// audit heads, which its peers check against [fleet.peers].
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/oxios/oxios/pkg/fleet"
)

func main() {
	out := flag.String("out", ".", "folder for the seed files HOST.nk (mode 0600)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: fleet-keys [-out DIR] HOST...")
		flag.PrintDefaults()
	}
	flag.Parse()
	hosts := flag.Args()
	if len(hosts) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "fleet-keys:", err)
		os.Exit(1)
	}
	pubs := map[string]string{}
	for _, h := range hosts {
		kp, err := nkeys.CreateUser()
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleet-keys:", err)
			os.Exit(1)
		}
		seed, _ := kp.Seed()
		pub, _ := kp.PublicKey()
		f := filepath.Join(*out, h+".nk")
		if err := os.WriteFile(f, append(seed, '\n'), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "fleet-keys:", err)
			os.Exit(1)
		}
		pubs[h] = pub
		fmt.Fprintf(os.Stderr, "fleet-keys: %s: copy %s to /etc/oxios/fleet.nk on %s (mode 0600, owned by oxiosd's user)\n", h, f, h)
	}
	fmt.Println("# In each NATS server's config (contrib/fleet/nats-hN.conf):")
	fmt.Println("authorization {\n  users: [")
	for _, h := range hosts {
		perms := strings.ReplaceAll(fleet.Permissions(h), "\n", "\n     ")
		fmt.Printf("    # %s\n    {nkey: %q, %s}\n", h, pubs[h], perms)
	}
	fmt.Println("  ]\n}")
	for _, h := range hosts {
		fmt.Printf("\n# In /etc/oxios/oxios.toml on %s:\n[fleet.peers]\n", h)
		for _, p := range hosts {
			if p != h {
				fmt.Printf("%s = %q\n", p, pubs[p])
			}
		}
	}
}
