package fs

import (
	"context"
	"time"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/vfs"
)

// Kernel is what the mount asks of the kernel: its syscalls, each through
// the kernel's gate, and nothing else. Declared here, by its one user, as
// the list of what the mount may call; its tests use a real kernel (no
// stand-in: a stand-in would have to reproduce the gate). The syscalls of
// the files of package vfs are vfs.Kernel.
type Kernel interface {
	vfs.Kernel
	Config() config.Config
	Identify(uid, gid uint32, pid int32) (*kernel.Cred, error)
	Refused(c *kernel.Cred, op, target string, raw []byte, code string)
	Subscribe(size int, match func(*bus.Event) bool) *bus.Sub

	// Agents and access, asked on every lookup: never audited.
	Agents(ctx context.Context, c *kernel.Cred) []string
	AgentVisible(c *kernel.Cred, agent string) bool
	MayAct(c *kernel.Cred, agent string) error

	// State.
	StateFolderTime(agent, prefix string) (time.Time, bool)

	// Whether a run of another agent sees to's folder as its inbox's slot.
	MsgSlot(c *kernel.Cred, to string) bool
}

var _ Kernel = (*kernel.Kernel)(nil)
