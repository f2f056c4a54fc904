package kernel

import "github.com/oxios/oxios/pkg/bus"

// Subscribe opens a queue of at most size events from the kernel's bus,
// filtered by match (nil: all). It is for the daemon's own parts (the
// mount's cache invalidation); clients get events through syscalls that
// check who is asking. Close the Sub when done.
func (k *Kernel) Subscribe(size int, match func(*bus.Event) bool) *bus.Sub {
	return k.bus.Subscribe(size, match)
}
