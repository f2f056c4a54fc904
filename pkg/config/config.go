// Package config reads oxios.toml, the daemon's configuration, and merges
// it with the defaults and the command line (flags > file > defaults).
// Every key is documented in oxios.toml(5); share/oxios.toml is the
// default file with each key at its default.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/oxios/oxios/pkg/proto"
)

// Config is the daemon's effective configuration.
type Config struct {
	Data        string `toml:"data"`
	Socket      string `toml:"socket"`
	SocketGroup string `toml:"socket_group"`
	Mount       string `toml:"mount"`
	NoMount     bool   `toml:"no_mount"`
	// Recover (oxiosd --recover, never from the file) starts with what a
	// damaged or missing journal still holds, recording the loss.
	Recover  bool   `toml:"-"`
	LogLevel string `toml:"log_level"`
	Limits   Limits `toml:"limits"`
	Access   Access `toml:"access"`
	Memory   Memory `toml:"memory"`
	LLM      LLM    `toml:"llm"`
	// Models are the named models of [models.NAME] (kept in LLM.Models,
	// which a reload carries).
	Models map[string]Model `toml:"models"`
	Runs   Runs             `toml:"runs"`
	Fleet  Fleet            `toml:"fleet"`
	// Policies is the folder of policy files the admin edits
	// (NAME.toml is agent NAME's), watched and applied as they change.
	Policies string `toml:"policies"`

	// File is the config file that was read, "" if none.
	File string `toml:"-"`
}

// DefaultMaxBuffered is limits.max_buffered when the config leaves it out
// and no request line may be longer.
const DefaultMaxBuffered = 64 << 20

// Limits bound what one request may carry, and what clients may hold of
// the daemon (issue 18).
type Limits struct {
	MaxValue Size `toml:"max_value"`
	MaxLine  Size `toml:"max_line"`
	// MaxBuffered bounds the memory all connections together hold in
	// request lines still being read (past each one's read buffer).
	MaxBuffered Size `toml:"max_buffered"`
	// MaxConns bounds the connections in all; MaxConnsPerUID those of one
	// uid. At a bound the longest idle connection of that uid (of the uid
	// with the most, for MaxConns) is closed to make room; with none idle
	// the new connection is refused.
	MaxConns       int `toml:"max_conns"`
	MaxConnsPerUID int `toml:"max_conns_per_uid"`
	// HelloTimeout is how long a new connection has for its first
	// request, LineTimeout how long one request line may take to arrive
	// once begun, IdleTimeout how long a connection with nothing in flight
	// may send nothing ("0" = never).
	HelloTimeout Duration `toml:"hello_timeout"`
	LineTimeout  Duration `toml:"line_timeout"`
	IdleTimeout  Duration `toml:"idle_timeout"`
	// DiskReserve is the free space below which writes are refused with
	// ENOSPC, kept so that the daemon can always finish its work behind
	// the journal, checkpoint and restart. "" = 64 MiB, or a sixteenth of
	// a file system smaller than 256 MiB.
	DiskReserve Size `toml:"disk_reserve"`
}

// Duration is a length of time written as a string such as "10s" or "5m".
type Duration time.Duration

// UnmarshalTOML implements toml.Unmarshaler.
func (d *Duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("want a duration such as \"10s\", got %T", v)
	}
	if s == "" {
		*d = -1 // the default, set by parse
		return nil
	}
	t, err := time.ParseDuration(s)
	if err != nil || t < 0 {
		return fmt.Errorf("bad duration %q: want one such as \"10s\" or \"5m\"", s)
	}
	*d = Duration(t)
	return nil
}

// Memory configures agent memory (issue 5).
type Memory struct {
	// WorkingTTL is how long working memory lives when no TTL is given
	// ("24h"; "0" keeps it).
	WorkingTTL string `toml:"working_ttl"`
	// EmbeddingsURL, when set, is an OpenAI-compatible API base URL
	// (".../v1") whose /embeddings vectors replace the local dense signal.
	EmbeddingsURL   string `toml:"embeddings_url"`
	EmbeddingsModel string `toml:"embeddings_model"`
	// EmbeddingsKeyEnv names the environment variable holding the API key.
	EmbeddingsKeyEnv string `toml:"embeddings_key_env"`

	workingTTL time.Duration
}

// LLM names the OpenAI-compatible endpoint LLM runs think through
// (issue 6): OpenAI, ollama, llama.cpp, vLLM...
type LLM struct {
	// BaseURL is the API base (".../v1"); "" means no LLM runs.
	BaseURL string `toml:"base_url"`
	Model   string `toml:"model"`
	// KeyEnv names the environment variable of oxiosd holding the API key,
	// passed to the runner.
	KeyEnv string `toml:"key_env"`
	// Prices per million tokens, to charge a run's cost.
	PromptPrice     float64 `toml:"prompt_price"`
	CompletionPrice float64 `toml:"completion_price"`
	// Timeout bounds one model call, its whole answer; FirstTokenTimeout
	// the wait for its first token and between two tokens (a hung server
	// fails fast; a slow long answer is not cut). Retries is how many
	// times a failed call is tried again (with backoff, behind the
	// daemon's circuit breaker).
	Timeout           string `toml:"timeout"`
	FirstTokenTimeout string `toml:"first_token_timeout"`
	Retries           int    `toml:"retries"`
	// MaxTokens caps each answer of a run (0: only budgets do);
	// Temperature, 0 to 2, is sent with each call (-1: none is, the
	// endpoint's default).
	MaxTokens   int     `toml:"max_tokens"`
	Temperature float64 `toml:"temperature"`
	// Models are the [models.NAME] of the file: a run that asks for NAME
	// (ox-spawn -m NAME) gets its endpoint, model, key and prices.
	Models map[string]Model `toml:"-"`

	urlFromEnv bool
}

// Model is a named model ([models.NAME]): where and what to ask, with
// its key and prices, and the options of its answers. What it leaves
// empty is [llm]'s.
type Model struct {
	BaseURL string `toml:"base_url"` // "": [llm]'s
	Model   string `toml:"model"`    // "": NAME
	KeyEnv  string `toml:"key_env"`  // "": [llm]'s
	// Prices per million tokens: this model's (0: free).
	PromptPrice     float64 `toml:"prompt_price" json:"prompt_price,omitempty"`
	CompletionPrice float64 `toml:"completion_price" json:"completion_price,omitempty"`
	// MaxTokens caps each answer (0: [llm]'s); Temperature, if set, is
	// sent when the run sets none.
	MaxTokens   int      `toml:"max_tokens"`
	Temperature *float64 `toml:"temperature"`
}

// Resolve is the endpoint config of the model name asks: that of
// [models.NAME] over l (its endpoint, key and prices), with the model to
// ask at the endpoint; l itself with name when no entry has that name.
func (l LLM) Resolve(name string) (LLM, string, *Model) {
	m, ok := l.Models[name]
	if !ok {
		return l, name, nil
	}
	if m.BaseURL != "" {
		l.BaseURL = m.BaseURL
	}
	if m.KeyEnv != "" {
		l.KeyEnv = m.KeyEnv
	}
	l.PromptPrice, l.CompletionPrice = m.PromptPrice, m.CompletionPrice
	if m.MaxTokens > 0 {
		l.MaxTokens = m.MaxTokens
	}
	model := m.Model
	if model == "" {
		model = name
	}
	return l, model, &m
}

// URLFromEnv reports whether BaseURL came from OPENAI_BASE_URL, base_url
// being unset: what to point at when the endpoint fails (ox-status).
func (l LLM) URLFromEnv() bool { return l.urlFromEnv }

// Runs configures the supervisor.
type Runs struct {
	// Runner is the LLM runner's path; "" = ox-agent beside oxiosd, else
	// in PATH.
	Runner string `toml:"runner"`
	// Keep is how many ended runs keep their records.
	Keep int `toml:"keep"`
	// Tools is the folder of the WASM tools (NAME.wasm, NAME.json); "" =
	// ../share/oxios/tools beside oxiosd (an install), else ../share/tools
	// (a build in the source tree). See ToolsDir.
	Tools string `toml:"tools"`
	// ToolsCache is the folder of the compiled tools, kept across
	// restarts and shared by daemons that name the same folder; "" =
	// DATA/cache/tools. See ToolsCacheDir.
	ToolsCache string `toml:"tools_cache"`
	// Cgroups gives each run and exec a control group of its own when the
	// machine lets oxiosd make them (see supervisor.Cgroups).
	Cgroups bool `toml:"cgroups"`
	// MaxConcurrent bounds the runs that run at once, MaxPerAgent those of
	// one agent (issue 8); beyond them a spawn waits in a priority queue.
	// 0 is no limit.
	MaxConcurrent int `toml:"max_concurrent"`
	MaxPerAgent   int `toml:"max_per_agent"`
	// OverloadLoad holds queued runs while the 1-minute load average per
	// core is above it; OverloadMemory while memory pressure (PSI "some
	// avg10", in percent) is above it. 0 is off.
	OverloadLoad   float64 `toml:"overload_load"`
	OverloadMemory float64 `toml:"overload_memory"`
	// WorkExpire is how long the work of a run on a host folder (ox-spawn
	// --work) is kept once the run has exited, applied or not ("0":
	// forever). See WorkTTL.
	WorkExpire string `toml:"work_expire"`
	workTTL    time.Duration
}

// WorkTTL is the parsed work_expire.
func (r Runs) WorkTTL() time.Duration { return r.workTTL }

// TTL is the parsed working_ttl.
func (m Memory) TTL() time.Duration { return m.workingTTL }

// Access says which peers besides root and the daemon's own uid may
// connect. Users are names or numeric uids.
type Access struct {
	Admins []Principal         `toml:"admins"`
	Users  map[string][]string `toml:"users"`
	users  map[uint32][]string // resolved Users
	admins map[uint32]struct{} // resolved Admins
}

// Principal is a user name or a uid in the config file.
type Principal string

// UnmarshalTOML accepts both `"alice"` and `1000`.
func (p *Principal) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*p = Principal(v)
	case int64:
		*p = Principal(strconv.FormatInt(v, 10))
	default:
		return fmt.Errorf("want a user name or uid, got %T", v)
	}
	return nil
}

// Default returns the configuration with every key at its default.
func Default() Config {
	p := proto.DefaultPaths()
	return Config{
		Data:     p.Data,
		Socket:   p.Socket,
		Mount:    p.Mount,
		LogLevel: "info",
		Limits: Limits{MaxValue: proto.DefaultMaxValue,
			MaxConns: 4096, MaxConnsPerUID: 1024,
			HelloTimeout: Duration(10 * time.Second), LineTimeout: Duration(30 * time.Second), IdleTimeout: Duration(time.Hour)},
		Memory:   Memory{WorkingTTL: "24h", EmbeddingsModel: "text-embedding-3-small", EmbeddingsKeyEnv: "OPENAI_API_KEY"},
		LLM:      LLM{Model: "gpt-4o-mini", KeyEnv: "OPENAI_API_KEY", Timeout: "10m", FirstTokenTimeout: "1m", Retries: 4, Temperature: -1},
		Runs:     Runs{Keep: 1000, Cgroups: true, WorkExpire: "168h"},
		Policies: filepath.Join(filepath.Dir(p.Config), "policies"),
	}
}

// Load reads the config file at file over the defaults. If file is the
// default path and does not exist, the defaults stand; any other missing
// file is an error. file "" means no file at all.
func Load(file string, explicit bool) (Config, error) {
	c := Default()
	if file == "" {
		return c, c.resolve()
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return c, c.resolve()
	}
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	if err := c.parse(b, file); err != nil {
		return c, err
	}
	c.File = file
	if err := c.resolve(); err != nil {
		return c, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

func (c *Config) parse(b []byte, file string) error {
	// Empty strings in the file mean "the default", as documented.
	def := *c
	md, err := toml.Decode(string(b), c)
	if err != nil {
		return fmt.Errorf("config %s: %w", file, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		// Users' table keys are free-form; everything else must be known.
		var unknown []string
		for _, k := range keys {
			if !strings.HasPrefix(k, "access.users.") {
				unknown = append(unknown, k)
			}
		}
		if len(unknown) > 0 {
			return fmt.Errorf("config %s: unknown key %s (see oxios.toml(5))", file, strings.Join(unknown, ", "))
		}
	}
	for _, s := range []struct {
		v *string
		d string
	}{
		{&c.Data, def.Data}, {&c.Socket, def.Socket}, {&c.Mount, def.Mount}, {&c.LogLevel, def.LogLevel},
		{&c.Memory.WorkingTTL, def.Memory.WorkingTTL}, {&c.Memory.EmbeddingsModel, def.Memory.EmbeddingsModel},
		{&c.Memory.EmbeddingsKeyEnv, def.Memory.EmbeddingsKeyEnv},
		{&c.Policies, def.Policies},
		{&c.LLM.Model, def.LLM.Model}, {&c.LLM.KeyEnv, def.LLM.KeyEnv}, {&c.LLM.Timeout, def.LLM.Timeout},
		{&c.LLM.FirstTokenTimeout, def.LLM.FirstTokenTimeout},
	} {
		if *s.v == "" {
			*s.v = s.d
		}
	}
	if c.Limits.MaxValue == 0 {
		c.Limits.MaxValue = def.Limits.MaxValue
	}
	if c.Limits.MaxConns == 0 {
		c.Limits.MaxConns = def.Limits.MaxConns
	}
	if c.Limits.MaxConnsPerUID == 0 {
		c.Limits.MaxConnsPerUID = def.Limits.MaxConnsPerUID
	}
	for _, d := range []struct{ v, d *Duration }{
		{&c.Limits.HelloTimeout, &def.Limits.HelloTimeout}, {&c.Limits.LineTimeout, &def.Limits.LineTimeout},
		{&c.Limits.IdleTimeout, &def.Limits.IdleTimeout},
	} {
		if *d.v < 0 {
			*d.v = *d.d
		}
	}
	if c.Runs.Keep == 0 {
		c.Runs.Keep = def.Runs.Keep
	}
	return nil
}

// resolve checks values and derives what is derived.
func (c *Config) resolve() error {
	if _, err := ParseLevel(c.LogLevel); err != nil {
		return err
	}
	if err := c.resolveFleet(); err != nil {
		return err
	}
	if c.Limits.MaxValue < 0 || c.Limits.MaxValue > 1<<30 {
		return fmt.Errorf("config: limits.max_value %d out of range (0 to 1GiB)", c.Limits.MaxValue)
	}
	if c.Limits.MaxLine == 0 {
		c.Limits.MaxLine = Size(proto.MaxLineFor(int(c.Limits.MaxValue)))
	}
	if c.Limits.MaxLine < 4096 {
		return fmt.Errorf("config: limits.max_line %d is below the 4096-byte minimum", c.Limits.MaxLine)
	}
	if c.Limits.MaxBuffered == 0 {
		// 64 MiB, or one line of the largest size if that is more: a
		// value of max_value must be able to arrive.
		c.Limits.MaxBuffered = max(DefaultMaxBuffered, c.Limits.MaxLine)
	}
	if c.Limits.MaxBuffered < 1<<20 {
		return fmt.Errorf("config: limits.max_buffered %d is below the 1MiB minimum", c.Limits.MaxBuffered)
	}
	if c.Limits.DiskReserve < 0 {
		return fmt.Errorf("config: limits.disk_reserve may not be negative")
	}
	if c.Limits.MaxConns < 1 || c.Limits.MaxConnsPerUID < 1 {
		return fmt.Errorf("config: limits.max_conns and limits.max_conns_per_uid: want 1 or more")
	}
	if c.Limits.HelloTimeout <= 0 || c.Limits.LineTimeout <= 0 {
		return fmt.Errorf("config: limits.hello_timeout and limits.line_timeout: want a duration above 0 such as \"10s\"")
	}

	for _, p := range []struct{ name, v string }{{"data", c.Data}, {"socket", c.Socket}, {"mount", c.Mount}, {"policies", c.Policies}} {
		if !path.IsAbs(p.v) {
			return fmt.Errorf("config: %s %q must be an absolute path", p.name, p.v)
		}
	}
	ttl, err := time.ParseDuration(c.Memory.WorkingTTL)
	if err != nil || ttl < 0 {
		return fmt.Errorf("config: memory.working_ttl %q: want a duration such as \"24h\" or \"0\"", c.Memory.WorkingTTL)
	}
	c.Memory.workingTTL = ttl
	if c.Runs.WorkExpire == "" {
		c.Runs.WorkExpire = "168h"
	}
	wttl, err := time.ParseDuration(c.Runs.WorkExpire)
	if err != nil || wttl < 0 {
		return fmt.Errorf("config: runs.work_expire %q: want a duration such as \"168h\" or \"0\"", c.Runs.WorkExpire)
	}
	c.Runs.workTTL = wttl
	urlFrom := "llm.base_url"
	if c.LLM.BaseURL == "" {
		// The convention of OpenAI's clients (and llm, mods, aider).
		c.LLM.BaseURL, urlFrom = os.Getenv("OPENAI_BASE_URL"), "OPENAI_BASE_URL (the environment; llm.base_url is not set)"
		c.LLM.urlFromEnv = c.LLM.BaseURL != ""
	}
	if c.LLM.BaseURL != "" {
		if err := CheckBaseURL(c.LLM.BaseURL); err != nil {
			return fmt.Errorf("config: %s: %v", urlFrom, err)
		}
	}
	if d, err := time.ParseDuration(c.LLM.Timeout); err != nil || d <= 0 {
		return fmt.Errorf("config: llm.timeout %q: want a duration such as \"10m\"", c.LLM.Timeout)
	}
	if d, err := time.ParseDuration(c.LLM.FirstTokenTimeout); err != nil || d <= 0 {
		return fmt.Errorf("config: llm.first_token_timeout %q: want a duration such as \"1m\"", c.LLM.FirstTokenTimeout)
	}
	if c.LLM.MaxTokens < 0 {
		return fmt.Errorf("config: llm.max_tokens %d: want 0 (no cap) or more", c.LLM.MaxTokens)
	}
	for name, m := range c.Models {
		if err := proto.CheckAgent(name); err != nil || strings.ContainsAny(name, "/ ") {
			return fmt.Errorf("config: models.%s: want a name of letters, digits, '-', '_' and '.'", name)
		}
		if m.BaseURL != "" {
			if err := CheckBaseURL(m.BaseURL); err != nil {
				return fmt.Errorf("config: models.%s.base_url: %v", name, err)
			}
		} else if c.LLM.BaseURL == "" {
			return fmt.Errorf("config: models.%s: no base_url, and [llm] has none", name)
		}
		if m.PromptPrice < 0 || m.CompletionPrice < 0 || m.MaxTokens < 0 {
			return fmt.Errorf("config: models.%s: prices and max_tokens may not be negative", name)
		}
		if t := m.Temperature; t != nil && (*t < 0 || *t > 2) {
			return fmt.Errorf("config: models.%s.temperature %v: want 0 to 2", name, *t)
		}
	}
	if len(c.Models) == 0 {
		c.Models = nil // an empty [models] is none
	}
	c.LLM.Models = c.Models
	if t := c.LLM.Temperature; t != -1 && (t < 0 || t > 2) {
		return fmt.Errorf("config: llm.temperature %v: want 0 to 2, or -1 for the endpoint's default", t)
	}
	if c.LLM.Retries < 0 || c.LLM.Retries > 100 {
		return fmt.Errorf("config: llm.retries %d: want 0 to 100", c.LLM.Retries)
	}
	if c.LLM.PromptPrice < 0 || c.LLM.CompletionPrice < 0 {
		return fmt.Errorf("config: llm prices may not be negative")
	}
	if c.Runs.Keep < 0 {
		return fmt.Errorf("config: runs.keep %d: want 0 or more", c.Runs.Keep)
	}
	if c.Runs.MaxConcurrent < 0 || c.Runs.MaxPerAgent < 0 {
		return fmt.Errorf("config: runs.max_concurrent and runs.max_per_agent: want 0 (no limit) or more")
	}
	if c.Runs.OverloadLoad < 0 || c.Runs.OverloadMemory < 0 || c.Runs.OverloadMemory > 100 {
		return fmt.Errorf("config: runs.overload_load (per core) and runs.overload_memory (percent, 0 to 100): want 0 (off) or more")
	}
	c.Access.admins = map[uint32]struct{}{}
	for _, a := range c.Access.Admins {
		uid, err := lookupUID(string(a))
		if err != nil {
			return fmt.Errorf("config: access.admins: %w", err)
		}
		c.Access.admins[uid] = struct{}{}
	}
	c.Access.users = map[uint32][]string{}
	names := make([]string, 0, len(c.Access.Users))
	for n := range c.Access.Users {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		uid, err := lookupUID(n)
		if err != nil {
			return fmt.Errorf("config: access.users: %w", err)
		}
		for _, g := range c.Access.Users[n] {
			if _, err := path.Match(g, "x"); err != nil {
				return fmt.Errorf("config: access.users.%s: bad agent pattern %q: %v", n, g, err)
			}
		}
		c.Access.users[uid] = c.Access.Users[n]
	}
	return nil
}

// IsAdmin reports whether uid is an admin by config (root and the daemon's
// own uid are admins regardless).
func (a *Access) IsAdmin(uid uint32) bool {
	_, ok := a.admins[uid]
	return ok
}

// Grant returns the agent patterns uid may use, and whether uid may
// connect at all.
func (a *Access) Grant(uid uint32) ([]string, bool) {
	g, ok := a.users[uid]
	return g, ok
}

func lookupUID(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("unknown user %q", s)
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("user %q has non-numeric uid %q", s, u.Uid)
	}
	return uint32(n), nil
}

// LookupGID resolves a group name or numeric gid.
func LookupGID(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, fmt.Errorf("unknown group %q", s)
	}
	return strconv.Atoi(g.Gid)
}

// ParseLevel maps a log_level value to a slog level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("config: log_level %q: want debug, info, warn or error", s)
}

// Size is a byte count written as an integer or a string with a unit
// (B, KiB, MiB, GiB; KB, MB, GB are read as the binary units too).
type Size int64

// UnmarshalTOML implements toml.Unmarshaler.
func (s *Size) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case int64:
		*s = Size(v)
		return nil
	case string:
		n, err := ParseSize(v)
		*s = n
		return err
	}
	return fmt.Errorf("want a size like 16MiB or a byte count, got %T", v)
}

// ParseSize parses "16MiB", "512 KiB", "1024"; "" is 0.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, nil
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	}
	mult := map[string]float64{
		"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
		"m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
	}[strings.ToLower(unit)]
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || f < 0 {
		return 0, fmt.Errorf("bad size %q: want a number with an optional unit B, KiB, MiB or GiB", s)
	}
	return Size(f * mult), nil
}

// CheckBaseURL says what is wrong with an endpoint's base URL, if
// anything: it must be an absolute http or https URL with a host, without
// a query, credentials or fragment (the key goes in key_env).
func CheckBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %v", s, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http:// or https:// URL such as https://api.openai.com/v1", s)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q has no host: want a URL such as http://localhost:8080/v1", s)
	case u.User != nil:
		return fmt.Errorf("%q holds credentials: put the API key in the environment variable key_env names", redactURL(u))
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q: a base URL has no query or fragment", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %s out of range", s, p)
		}
	}
	return nil
}

func redactURL(u *url.URL) string {
	c := *u
	c.User = url.User("…")
	return c.String()
}
