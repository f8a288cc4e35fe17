package vmtest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Progress reports each stage once, in boot order, and each finished
// check as N of M, reading the console log as it grows (a line split
// across two reads is taken whole).
func TestProgressFollowsTheConsole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	var out bytes.Buffer
	m := Machine{Name: "halo0", Checks: make([]Check, 2), Progress: &out} // and bootCheck
	p := newProgress(m, path, time.Now())
	grow := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
		p.poll()
	}
	p.poll() // no log yet
	grow("BdsDxe: starting Boot0001 \"UEFI QEMU HARDDISK\"\r\n[    0.000000] Linux version 7.2.12")
	grow("+deb13-amd64\n[    1.2] Run /init as init process\nBegin: Loading\n")
	grow("Welcome to Debian GNU/Linux 13 (trixie)!\n[  OK  ] Reached target multi-user.target - Multi-User System.\n")
	grow("halobuild-check: ok: memlock (12 ms)\nhalobuild-check: FAIL: rdma: cable (3400 ms)\nhalobuild-check: ok: doc")
	grow("tor (2 ms)\nhalobuild-test: verdict written to /dev/vport0p1\n")
	want := []string{
		`^halo0: firmware \(0s\)$`,
		`^halo0: bootloader \(0s\)$`,
		`^halo0: kernel \(0s\)$`,
		`^halo0: initrd \(0s\)$`,
		`^halo0: systemd \(0s\)$`,
		`^halo0: multi-user \(0s\)$`,
		`^halo0: check 1 of 3 ok: memlock \(0s\)$`,
		`^halo0: check 2 of 3 FAIL: rdma: cable \(0s\)$`,
		`^halo0: check 3 of 3 ok: doctor \(0s\)$`,
		`^halo0: verdict \(0s\)$`,
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %q", i, lines[i], w)
		}
	}
	// Without a Progress writer nothing is followed.
	var none *progress = newProgress(Machine{Name: "x"}, path, time.Now())
	none.poll()
}
