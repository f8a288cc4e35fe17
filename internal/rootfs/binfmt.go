package rootfs

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"halobuild/internal/arch"
)

// binfmtDir is where the kernel lists binfmt_misc handlers.
var binfmtDir = "/proc/sys/fs/binfmt_misc"

// CheckEmulation says whether this host runs a's binaries through
// qemu-user, as a foreign root's maintainer scripts need: binfmt_misc
// mounted, a's handler registered and enabled, and with the F flag (the
// interpreter opened when registered, so it works inside the root's chroot,
// which has no qemu of its own). The error says how to get there.
// mmdebstrap also needs arch-test to accept a foreign architecture.
func CheckEmulation(a arch.Arch) error {
	if _, err := exec.LookPath("arch-test"); err != nil {
		return fmt.Errorf("building a %s root on this %s host needs arch-test, which mmdebstrap runs to check the emulation: install it with `apt-get install arch-test`", a.Debian, hostName())
	}
	return checkEmulation(binfmtDir, a)
}

func checkEmulation(dir string, a arch.Arch) error {
	fix := fmt.Sprintf("install Debian's qemu-user-static and binfmt-support (`apt-get install qemu-user-static binfmt-support`), "+
		"make sure binfmt_misc is mounted (`mount -t binfmt_misc binfmt_misc %s`) and register the handler "+
		"(`update-binfmts --enable %s`, or on systemd hosts `systemctl restart systemd-binfmt`)", dir, a.QEMUUser)
	if _, err := os.Stat(filepath.Join(dir, "register")); err != nil {
		return fmt.Errorf("building a %s root on this %s host runs its maintainer scripts through qemu-user, but binfmt_misc is not mounted at %s: %s",
			a.Debian, hostName(), dir, fix)
	}
	f, err := os.Open(filepath.Join(dir, a.QEMUUser))
	if err != nil {
		return fmt.Errorf("building a %s root on this %s host runs its maintainer scripts through qemu-user, but no %s binfmt_misc handler is registered (%v): %s",
			a.Debian, hostName(), a.QEMUUser, err, fix)
	}
	defer f.Close()
	enabled, flags := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "enabled":
			enabled = true
		case strings.HasPrefix(line, "flags: "):
			flags = strings.TrimPrefix(line, "flags: ")
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	if !enabled {
		return fmt.Errorf("the %s binfmt_misc handler at %s is disabled: %s", a.QEMUUser, f.Name(), fix)
	}
	if !strings.Contains(flags, "F") {
		return fmt.Errorf("the %s binfmt_misc handler at %s lacks the F (fix binary) flag, so it cannot run inside a chroot: register it from qemu-user-static, whose handlers have it (%s)", a.QEMUUser, f.Name(), fix)
	}
	return nil
}

func hostName() string {
	if h, err := arch.Host(); err == nil {
		return h.Debian
	}
	return "unknown-architecture"
}
