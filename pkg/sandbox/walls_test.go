package sandbox

import (
	"encoding/binary"
	"testing"

	seccomp "github.com/elastic/go-seccomp-bpf"
	seccomparch "github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data for x/net/bpf's machine, which
// loads words big-endian where the kernel loads them in the native
// order: each word is written big-endian so that both read the same
// values.
func seccompData(arch uint32, nr uint32, arg0 uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], nr)
	binary.BigEndian.PutUint32(b[4:], arch)
	// args[0], as the filter's 32-bit loads of it see it (low word at
	// offset 16 on little-endian machines, which the library assumes).
	binary.BigEndian.PutUint32(b[16:], uint32(arg0))
	binary.BigEndian.PutUint32(b[20:], uint32(arg0>>32))
	return b
}

// verdict runs prog on a call.
func verdict(t *testing.T, prog []bpf.Instruction, arch, nr uint32, arg0 uint64) uint32 {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vm.Run(seccompData(arch, nr, arg0))
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

const (
	retAllow = 0x7fff0000
	retErrno = 0x00050000
)

// TestFilterForeignArch runs the filter the shim loads on calls made
// through every entry of an x86-64 kernel (the machine's own kernel may
// lack the 32-bit one, as a PVM guest's does): a call of another
// architecture or of x32 kills the process; native calls meet the list.
// It first shows what the guard is for: the library's program alone
// lets a foreign architecture's unshare through.
func TestFilterForeignArch(t *testing.T) {
	native, err := seccomparch.GetInfo("")
	if err != nil {
		t.Skip(err)
	}
	if native.ID != seccomparch.X86_64.ID {
		t.Skipf("the entries tried are x86-64's; this is %s", native.Name)
	}
	i386 := uint32(seccomparch.I386.ID)
	const (
		i386Unshare = 310
		i386Keyctl  = 288
		i386Getpid  = 20
	)
	p := policy()
	bare, err := p.Assemble()
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, bare, i386, i386Unshare, unix.CLONE_NEWUSER); v != retAllow {
		t.Fatalf("the library's program alone: i386 unshare gives %#x; the guard's reason is gone, look again", v)
	}
	prog, err := filter()
	if err != nil {
		t.Fatal(err)
	}
	x64 := uint32(native.ID)
	for _, c := range []struct {
		name     string
		arch, nr uint32
		arg0     uint64
		want     uint32
	}{
		{"i386 unshare(CLONE_NEWUSER)", i386, i386Unshare, unix.CLONE_NEWUSER, retKillProcess},
		{"i386 keyctl", i386, i386Keyctl, 0, retKillProcess},
		{"i386 getpid", i386, i386Getpid, 0, retKillProcess},
		{"x32 unshare", x64, unix.SYS_UNSHARE | 0x40000000, unix.CLONE_NEWUSER, retKillProcess},
		{"x32 getpid", x64, unix.SYS_GETPID | 0x40000000, 0, retKillProcess},
		{"arm64 anything", 0xc00000b7, 97, 0, retKillProcess}, // AUDIT_ARCH_AARCH64
		{"unshare", x64, unix.SYS_UNSHARE, unix.CLONE_NEWUSER, retErrno | uint32(unix.EPERM)},
		{"keyctl", x64, unix.SYS_KEYCTL, 0, retErrno | uint32(unix.EPERM)},
		{"add_key", x64, unix.SYS_ADD_KEY, 0, retErrno | uint32(unix.EPERM)},
		{"io_uring_setup", x64, unix.SYS_IO_URING_SETUP, 0, retErrno | uint32(unix.EPERM)},
		{"clone(CLONE_NEWUSER)", x64, unix.SYS_CLONE, unix.CLONE_NEWUSER, retErrno | uint32(unix.EPERM)},
		{"clone3", x64, unix.SYS_CLONE3, 0, retErrno | uint32(unix.ENOSYS)},
		{"clone(SIGCHLD)", x64, unix.SYS_CLONE, uint64(unix.SIGCHLD), retAllow},
		{"getpid", x64, unix.SYS_GETPID, 0, retAllow},
		{"openat", x64, unix.SYS_OPENAT, 0, retAllow},
	} {
		if v := verdict(t, prog, c.arch, c.nr, c.arg0); v != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, v, c.want)
		}
	}
	// The filter's actions are the kernel's: the library's constants.
	if uint32(seccomp.ActionAllow) != retAllow || uint32(seccomp.ActionErrno) != retErrno {
		t.Fatalf("the library's actions moved: allow %#x errno %#x", seccomp.ActionAllow, seccomp.ActionErrno)
	}
}
