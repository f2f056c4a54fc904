package proto

import (
	"os"
	"path/filepath"
	"strconv"
)

// Paths are the default locations of the daemon's files: system-wide for
// root, XDG base directories for everyone else. The daemon and the clients
// agree on them through this one function.
type Paths struct {
	Config string
	Data   string
	Socket string
	Mount  string
}

// DefaultPaths returns the defaults for the current user.
func DefaultPaths() Paths {
	if os.Geteuid() == 0 {
		return Paths{
			Config: "/etc/oxios/oxios.toml",
			Data:   "/var/lib/oxios",
			Socket: "/run/oxios/oxiosd.sock",
			Mount:  "/run/oxios/mnt",
		}
	}
	home, _ := os.UserHomeDir()
	env := func(name, fallback string) string {
		if v := os.Getenv(name); filepath.IsAbs(v) {
			return v
		}
		return fallback
	}
	config := env("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	data := env("XDG_DATA_HOME", filepath.Join(home, ".local", "share"))
	// Without XDG_RUNTIME_DIR (no login session, e.g. cron) fall back to a
	// per-user directory that the daemon creates 0700.
	runtime := env("XDG_RUNTIME_DIR", filepath.Join(os.TempDir(), "oxios-"+strconv.Itoa(os.Geteuid())))
	return Paths{
		Config: filepath.Join(config, "oxios", "oxios.toml"),
		Data:   filepath.Join(data, "oxios"),
		Socket: filepath.Join(runtime, "oxios", "oxiosd.sock"),
		Mount:  filepath.Join(runtime, "oxios", "mnt"),
	}
}

// SocketPath is the socket a client dials: $OXIOS_SOCKET if set, else the
// default.
func SocketPath() string {
	if s := os.Getenv("OXIOS_SOCKET"); s != "" {
		return s
	}
	return DefaultPaths().Socket
}
