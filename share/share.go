// Package share holds the defaults shipped with Oxios, embedded in the
// binaries that need them: the default policy of a new agent.
package share

import "embed"

// DefaultPolicy is policies/default.toml.
//
//go:embed policies/default.toml
var DefaultPolicy []byte

// Personas are personas/NAME.toml: named system prompts with defaults
// for LLM runs (ox-agent --persona NAME); an agent's own, in its state
// under personas/NAME, comes first.
//
//go:embed personas/*.toml
var Personas embed.FS

// Skills holds the skills shipped with Oxios (skills/NAME/SKILL.md and
// their files), which ox-skill installs into an agent by name.
//
//go:embed skills
var Skills embed.FS

// Programs holds the programs shipped with Oxios (programs/NAME/: a
// program.toml, a SKILL.md and scripts), which ox-program installs into
// an agent by name.
//
//go:embed programs
var Programs embed.FS
