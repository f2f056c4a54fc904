package sandbox

import (
	"os"
	"strings"
)

// procSys is where UserNSHint reads the kernel's switches (a test
// points it elsewhere).
var procSys = "/proc/sys"

// UserNSHint says which switch of the kernel keeps an ordinary user from
// making user namespaces, and the command (as root) that turns it on;
// "" when none of those known is off.
func UserNSHint() string {
	read := func(p string) string {
		b, err := os.ReadFile(procSys + "/" + p)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("kernel/unprivileged_userns_clone") == "0":
		return "kernel.unprivileged_userns_clone is 0; enable it with: sysctl -w kernel.unprivileged_userns_clone=1"
	case read("user/max_user_namespaces") == "0":
		return "user.max_user_namespaces is 0; enable it with: sysctl -w user.max_user_namespaces=15000"
	case read("kernel/apparmor_restrict_unprivileged_userns") == "1":
		return "AppArmor restricts unprivileged user namespaces; allow them with: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile for oxios-sandbox-init with the userns rule)"
	}
	return "see user_namespaces(7) for what your kernel, container or security module forbids"
}
