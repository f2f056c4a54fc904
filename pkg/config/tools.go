package config

import (
	"os"
	"path/filepath"
)

// MountAt is where oxiosd mounts the agents' world: mount, "" with
// no_mount.
func (c Config) MountAt() string {
	if c.NoMount {
		return ""
	}
	return c.Mount
}

// ToolsDir is the folder of the WASM tools: runs.tools if set, else the
// first that exists of ../share/oxios/tools beside the executable (make
// install puts oxiosd in PREFIX/bin and the tools in
// PREFIX/share/oxios/tools) and ../share/tools (bin/oxiosd of a source
// tree, where make tools builds them). When neither exists, the first.
func (c Config) ToolsDir() string {
	if c.Runs.Tools != "" {
		return c.Runs.Tools
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	base := filepath.Dir(filepath.Dir(exe))
	installed := filepath.Join(base, "share", "oxios", "tools")
	for _, d := range []string{installed, filepath.Join(base, "share", "tools")} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	return installed
}

// ToolsCacheDir is the folder of the compiled WASM tools: runs.tools_cache
// if set, else DATA/cache/tools.
func (c Config) ToolsCacheDir() string {
	if c.Runs.ToolsCache != "" {
		return c.Runs.ToolsCache
	}
	return filepath.Join(c.Data, "cache", "tools")
}
