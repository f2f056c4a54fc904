package policy

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
)

// The questions of the authorize step besides exec. Each answers nil or a
// *Denied naming the rule; none allocates on the allowed path.

// CheckPattern reports whether pat is a key pattern: '/'-separated
// segments, each "**" (any number of segments) or a path.Match pattern.
func CheckPattern(pat string) error {
	if pat == "" {
		return fmt.Errorf("empty pattern")
	}
	if strings.HasPrefix(pat, "/") || strings.HasSuffix(pat, "/") || strings.Contains(pat, "//") {
		return fmt.Errorf("pattern %q: want segments like notes/** or *.md, no leading, trailing or double /", pat)
	}
	for _, seg := range strings.Split(pat, "/") {
		if seg == ".." || seg == "." {
			return fmt.Errorf("pattern %q: no . or .. segments", pat)
		}
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			return fmt.Errorf("pattern %q: ** must be a whole segment", pat)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("pattern %q: %v", pat, err)
		}
	}
	return nil
}

// MatchKey reports whether key matches pat: "*" and "?" and classes match
// within a segment, "**" any number of whole segments.
func MatchKey(pat, key string) bool {
	for {
		if pat == "**" {
			return true
		}
		pseg, prest, pmore := strings.Cut(pat, "/")
		if pseg == "**" {
			// Zero segments, or one more and try again.
			if MatchKey(prest, key) {
				return true
			}
			_, krest, kmore := strings.Cut(key, "/")
			if !kmore {
				return false
			}
			key = krest
			continue
		}
		kseg, krest, kmore := strings.Cut(key, "/")
		if ok, _ := path.Match(pseg, kseg); !ok {
			return false
		}
		if !pmore || !kmore {
			// Out of key: what is left of the pattern must match nothing.
			return !pmore && !kmore || !kmore && strings.Trim(strings.ReplaceAll(prest, "**", ""), "/") == ""
		}
		pat, key = prest, krest
	}
}

func matchAny(pats []string, key string) bool {
	for _, p := range pats {
		if MatchKey(p, key) {
			return true
		}
	}
	return false
}

// CheckStateRead: may the agent read key (a key, or a prefix being
// listed)?
func (p *Policy) CheckStateRead(key string) error {
	if matchAny(p.State.Read, key) {
		return nil
	}
	return &Denied{Rule: "state.read", Reason: fmt.Sprintf("key %q is not readable under the policy's state.read", key)}
}

// CheckStateList: may the agent list under prefix ("" is everything)?
// Listing shows names: any readable pattern is enough to list, and the
// kernel filters what is shown with CanRead.
func (p *Policy) CheckStateList() error {
	if len(p.State.Read) > 0 {
		return nil
	}
	return &Denied{Rule: "state.read", Reason: "the policy's state.read grants no key"}
}

// CanRead reports whether key may be read (for filtering listings).
func (p *Policy) CanRead(key string) bool { return matchAny(p.State.Read, key) }

// CheckStateWrite: may the agent write (or delete) key, taking its state
// to total bytes?
func (p *Policy) CheckStateWrite(key string, total int64) error {
	if !matchAny(p.State.Write, key) && !matchAny(p.Ask.State, key) {
		return &Denied{Rule: "state.write", Reason: fmt.Sprintf("key %q is not writable under the policy's state.write", key)}
	}
	if q := int64(p.State.Quota); q > 0 && total > q {
		return &Denied{Rule: "state.quota", Reason: fmt.Sprintf("the agent's state would hold %d bytes, over its quota of %d", total, q)}
	}
	return p.CheckStateAsk(key)
}

// CheckMemory: may the agent use memories of kind, holding count in all
// after the change?
func (p *Policy) CheckMemory(kind string, count int64) error {
	if !slices.Contains(p.Memory.Kinds, kind) {
		return &Denied{Rule: "memory.kinds", Reason: fmt.Sprintf("memory kind %q is not on the policy's memory.kinds", kind)}
	}
	if q := p.Memory.Quota; q > 0 && count > q {
		return &Denied{Rule: "memory.quota", Reason: fmt.Sprintf("the agent would hold %d memories, over its quota of %d", count, q)}
	}
	return nil
}

// CheckMemoryBytes: may the agent's memories hold total bytes (their
// files) after the change?
func (p *Policy) CheckMemoryBytes(total int64) error {
	max := int64(p.Memory.MaxBytes)
	if max <= 0 {
		max = DefaultMemoryBytes
	}
	if total > max {
		return &Denied{Rule: "memory.max_bytes", Reason: fmt.Sprintf("the agent's memories would hold %d bytes, over its memory.max_bytes of %d", total, max)}
	}
	return nil
}

// CheckMemories is CheckMemory of each of kinds, the kinds of a batch of
// new memories, with count held in all after the batch: the first
// refusal.
func (p *Policy) CheckMemories(kinds []string, count int64) error {
	for _, kind := range kinds {
		if err := p.CheckMemory(kind, count); err != nil {
			return err
		}
	}
	return nil
}

// CheckRecall: may the agent use (recall, list, forget) memories of kind?
// "" asks for any kind it is given, which needs one on memory.kinds.
func (p *Policy) CheckRecall(kind string) error {
	if kind == "" {
		if len(p.Memory.Kinds) == 0 {
			return p.CheckMemory("working", 0) // names the rule
		}
		return nil
	}
	return p.CheckMemory(kind, 0)
}

// CheckWork: may the agent's runs take the host folder dir (absolute,
// clean, its links resolved) as their work?
func (p *Policy) CheckWork(dir string) error {
	if strings.HasPrefix(dir, "/") && dir != "/" {
		for _, g := range p.Work.Allow {
			if MatchKey(g[1:], dir[1:]) {
				return nil
			}
		}
	}
	return &Denied{Rule: "work.allow", Reason: fmt.Sprintf("folder %s is not on the policy's work.allow list", dir)}
}

// CheckModel: may the agent ask for the model of oxios.toml named name?
func (p *Policy) CheckModel(name string) error {
	if !p.LLM.limited {
		return nil
	}
	// path.Match's "*" stops at "/": a model's name may hold one
	// (meta-llama/Llama-3), which is no folder.
	n := strings.ReplaceAll(name, "/", "\x00")
	for _, m := range p.LLM.Models {
		if ok, _ := path.Match(strings.ReplaceAll(m, "/", "\x00"), n); ok {
			return nil
		}
	}
	if len(p.LLM.Models) == 0 {
		return &Denied{Rule: "llm.models", Reason: fmt.Sprintf("model %q may not be asked for: the policy's llm.models lists none", name)}
	}
	return &Denied{Rule: "llm.models", Reason: fmt.Sprintf("model %q is not on the policy's llm.models list (%s)", name, strings.Join(p.LLM.Models, ", "))}
}

// CheckTool: may the agent run WASM tool name?
func (p *Policy) CheckTool(name string) error {
	if err := p.CheckToolAsk(name); err != nil {
		return err
	}
	if slices.Contains(p.Tools.Allow, name) {
		return nil
	}
	return &Denied{Rule: "tools.allow", Reason: fmt.Sprintf("tool %q is not on the policy's tools.allow list", name)}
}

// hostRule is an entry of net.allow: a host name (exact, or "*.domain"
// for its subdomains), an address or a network.
type hostRule struct {
	name   string // lower case; "" for an address rule
	suffix bool   // "*.example.org": name is ".example.org"
	pfx    netip.Prefix
}

func parseHost(s string) (hostRule, error) {
	if pfx, err := netip.ParsePrefix(s); err == nil {
		return hostRule{pfx: pfx.Masked()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return hostRule{pfx: netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())}, nil
	}
	h := strings.ToLower(s)
	suffix := strings.HasPrefix(h, "*.")
	if suffix {
		h = h[1:]
	}
	if h == "" || strings.ContainsAny(h, "/:@ *\t") {
		return hostRule{}, fmt.Errorf("%q: want a host name, *.domain, an address or a network (10.0.0.0/8)", s)
	}
	return hostRule{name: h, suffix: suffix}, nil
}

// compile prepares what checks need.
func (p *Policy) compile() {
	p.hosts = p.hosts[:0]
	for _, h := range p.Net.Allow {
		if r, err := parseHost(h); err == nil {
			p.hosts = append(p.hosts, r)
		}
	}
}

// CheckHost: may the fetch syscall go to host name (before resolving)?
// An address literal is checked as an address.
func (p *Policy) CheckHost(host string) error {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return p.CheckAddr(h, a)
	}
	for _, r := range p.hosts {
		if r.name == "" {
			continue
		}
		if r.name == h || r.suffix && strings.HasSuffix(h, r.name) {
			return p.CheckHostAsk(host)
		}
	}
	if err := p.CheckHostAsk(host); err != nil {
		return err
	}
	return &Denied{Rule: "net.allow", Reason: fmt.Sprintf("host %q is not on the policy's net.allow list", host)}
}

// CheckAddr: may the fetch syscall connect to a, which host resolved to?
// A public address of an allowed host is fine; a private, loopback,
// link-local or otherwise special one only when an address rule lists it.
func (p *Policy) CheckAddr(host string, a netip.Addr) error {
	a = a.Unmap()
	for _, r := range p.hosts {
		if r.name == "" && r.pfx.Contains(a) {
			return nil
		}
	}
	if special(a) {
		return &Denied{Rule: "net.private", Reason: fmt.Sprintf("host %q is at %s, a private, loopback or link-local address that net.allow does not list", host, a)}
	}
	// A public address: the host name must be allowed, or the address
	// itself when it was given as one.
	if h := strings.Trim(host, "[]"); h == a.String() {
		return &Denied{Rule: "net.allow", Reason: fmt.Sprintf("address %s is not on the policy's net.allow list", a)}
	}
	return nil
}

// special: addresses a fetch may not reach unless listed.
func special(a netip.Addr) bool {
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsMulticast() || a.IsUnspecified() || a.IsInterfaceLocalMulticast() ||
		cgnat.Contains(a) || (a.Is6() && (ula.Contains(a) || nat64.Contains(a)))
}

var (
	cgnat = netip.MustParsePrefix("100.64.0.0/10")
	ula   = netip.MustParsePrefix("fc00::/7")
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)
