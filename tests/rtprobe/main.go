// Command oxios-rtprobe is the red team's probe of the kernel's entry
// points from inside a run (tests/integration/redteam_test.go): system
// calls made through the other entries of the architecture (i386's
// int $0x80 and sysenter, x32's numbers), the kernel's shared objects
// (keyrings, io_uring, userfaultfd) and abstract Unix sockets. Each
// probe prints one line, "NAME ok ..." when the call went through or
// "NAME errno N (text)" when it was refused; a probe the seccomp filter
// kills prints nothing more.
//
// The 32-bit calls take their pointers from static memory: a static,
// non-PIE Go binary keeps its data below 4 GiB, where the 32-bit entry
// can reach it.
package main

import (
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// low is static memory for the 32-bit calls' strings.
var low [4096]byte

// lowStr copies strings into low, each NUL-ended, and returns their
// addresses.
func lowStr(ss ...string) []uintptr {
	var out []uintptr
	off := 0
	for _, s := range ss {
		out = append(out, uintptr(unsafe.Pointer(&low[off])))
		off += copy(low[off:], s)
		low[off] = 0
		off++
	}
	return out
}

// i386 system call numbers (arch/x86/entry/syscalls/syscall_32.tbl).
const (
	i386Getpid  = 20
	i386Ptrace  = 26
	i386Mkdir   = 39
	i386Chroot  = 61
	i386AddKey  = 286
	i386Keyctl  = 288
	i386Unshare = 310
	i386Kcmp    = 349
	i386Bpf     = 357
)

// x32Bit marks a call of the x32 ABI.
const x32Bit = 0x40000000

func report(name string, r uintptr) {
	if e := int32(r); e < 0 && e > -4096 {
		fmt.Printf("%s errno %d (%v)\n", name, -e, unix.Errno(-e))
		return
	}
	fmt.Printf("%s ok %d\n", name, int32(r))
}

func reportErr(name string, err error) {
	if err != nil {
		errno, _ := err.(unix.Errno)
		fmt.Printf("%s errno %d (%v)\n", name, int(errno), err)
		return
	}
	fmt.Printf("%s ok\n", name)
}

// compat makes the i386 call named by what through entry (int80 or
// sysenter).
func compat(entry func(nr, a1, a2, a3 uintptr) uintptr, what string, args []string) {
	switch what {
	case "getpid":
		report(what, entry(i386Getpid, 0, 0, 0))
	case "unshare":
		r := entry(i386Unshare, unix.CLONE_NEWUSER, 0, 0)
		report(what, r)
		if int32(r) == 0 {
			b, _ := os.ReadFile("/proc/self/status")
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "CapEff:") {
					fmt.Println(what, "in a new user namespace:", l)
				}
			}
		}
	case "mkdir":
		p := lowStr(args[0])
		report(what, entry(i386Mkdir, p[0], 0o755, 0))
	case "chroot":
		p := lowStr("/")
		report(what, entry(i386Chroot, p[0], 0, 0))
	case "add_key":
		p := lowStr("user", "oxios-rt", "s3cret")
		// add_key has five arguments: the payload's length and the
		// keyring go in esi and edi, which entry does not set; keyctl's
		// join below is enough to show the keyring reached.
		report(what, entry(i386AddKey, p[0], p[1], p[2]))
	case "keyctl":
		// KEYCTL_GET_KEYRING_ID (0) of the session keyring (-3).
		report(what, entry(i386Keyctl, 0, uintptr(0xfffffffd), 0))
	case "ptrace":
		// PTRACE_ATTACH (16) to pid 1, the run's init.
		report(what, entry(i386Ptrace, 16, 1, 0))
	case "kcmp":
		report(what, entry(i386Kcmp, 1, 1, 0))
	case "bpf":
		// BPF_PROG_LOAD with no attributes: EFAULT or EINVAL shows the
		// kernel's bpf reached; a filter's refusal is EPERM.
		report(what, entry(i386Bpf, 5, 0, 0))
	default:
		fmt.Fprintln(os.Stderr, "oxios-rtprobe: unknown call", what)
		os.Exit(2)
	}
}

func main() {
	// A probe that faults (no 32-bit entry in this kernel) says so in a
	// line, not in a page of goroutines.
	debug.SetTraceback("none")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: oxios-rtprobe int80|sysenter|x32|native|abstract-listen|abstract-connect ...")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "int80":
		compat(int80, args[0], args[1:])
	case "sysenter":
		compat(sysenter, args[0], args[1:])
	case "x32":
		// The x32 numbers are the native ones with bit 30 set for the
		// calls both ABIs share.
		switch args[0] {
		case "unshare":
			_, _, e := unix.RawSyscall(unix.SYS_UNSHARE|x32Bit, unix.CLONE_NEWUSER, 0, 0)
			reportErrno("unshare", e)
		case "mkdir":
			p, _ := unix.BytePtrFromString(args[1])
			_, _, e := unix.RawSyscall(unix.SYS_MKDIR|x32Bit, uintptr(unsafe.Pointer(p)), 0o755, 0)
			reportErrno("mkdir", e)
		case "keyctl":
			_, _, e := unix.RawSyscall(unix.SYS_KEYCTL|x32Bit, 0, uintptr(0xfffffffffffffffd), 0)
			reportErrno("keyctl", e)
		}
	case "native":
		native(args[0])
	case "memfd-exec":
		// A program copied into an anonymous file and run from it (args:
		// the program, then its argv): no
		// path of it exists for Landlock to judge.
		b, err := os.ReadFile(args[0])
		if err != nil {
			reportErr("memfd-exec", err)
			os.Exit(1)
		}
		fd, err := unix.MemfdCreate("oxios-rt", 0)
		if err == nil {
			_, err = unix.Write(fd, b)
		}
		if err == nil {
			err = unix.Exec(fmt.Sprintf("/proc/self/fd/%d", fd), args[1:], os.Environ())
		}
		reportErr("memfd-exec", err)
		os.Exit(1)
	case "abstract-listen":
		l, err := net.Listen("unix", "@"+args[0])
		if err != nil {
			reportErr("listen", err)
			os.Exit(1)
		}
		fmt.Println("listen ok")
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, "hello from the listener")
				c.Close()
			}
		}()
		time.Sleep(30 * time.Second)
	case "abstract-connect":
		c, err := net.Dial("unix", "@"+args[0])
		if err != nil {
			fmt.Printf("connect failed: %v\n", err)
			os.Exit(1)
		}
		b := make([]byte, 64)
		n, _ := c.Read(b)
		fmt.Printf("connect ok: %s", b[:n])
	default:
		fmt.Fprintln(os.Stderr, "oxios-rtprobe: unknown probe", os.Args[1])
		os.Exit(2)
	}
}

func reportErrno(name string, e unix.Errno) {
	if e != 0 {
		fmt.Printf("%s errno %d (%v)\n", name, int(e), e)
		return
	}
	fmt.Printf("%s ok\n", name)
}

// native makes the 64-bit calls of the kernel's shared objects.
func native(what string) {
	switch what {
	case "add_key":
		_, err := unix.AddKey("user", "oxios-rt", []byte("s3cret"), unix.KEY_SPEC_SESSION_KEYRING)
		reportErr(what, err)
	case "keyctl":
		_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
		reportErr(what, err)
	case "io_uring":
		var params [120]byte
		_, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
		reportErrno(what, e)
	case "userfaultfd":
		_, _, e := unix.RawSyscall(unix.SYS_USERFAULTFD, 0, 0, 0)
		reportErrno(what, e)
	case "unshare":
		reportErr(what, unix.Unshare(unix.CLONE_NEWUSER))
	case "perf_event_open":
		var attr unix.PerfEventAttr
		attr.Size = uint32(unsafe.Sizeof(attr))
		_, err := unix.PerfEventOpen(&attr, 0, -1, -1, 0)
		reportErr(what, err)
	case "bpf":
		_, _, e := unix.RawSyscall(unix.SYS_BPF, 5, 0, 0)
		reportErrno(what, e)
	default:
		fmt.Fprintln(os.Stderr, "oxios-rtprobe: unknown call", what)
		os.Exit(2)
	}
}
