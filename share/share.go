// Package share holds the defaults shipped with Oxios, embedded in the
// binaries that need them: the default policy of a new agent.
package share

import _ "embed"

// DefaultPolicy is policies/default.toml.
//
//go:embed policies/default.toml
var DefaultPolicy []byte
