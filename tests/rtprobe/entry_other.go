//go:build !amd64

package main

import "golang.org/x/sys/unix"

// Other architectures have no i386 entry: the probes say so.
func int80(nr, a1, a2, a3 uintptr) uintptr    { return uintptr(-unix.ENOSYS) }
func sysenter(nr, a1, a2, a3 uintptr) uintptr { return uintptr(-unix.ENOSYS) }
