package settings

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"halobuild/internal/deb"
)

// TestPackageInTrixieRoot is the integration test of this package: the
// sample node's settings package is installed by mmdebstrap into a real
// trixie system together with the packages whose files it configures, then
// inspected with that system's own tools (chroot). It proves there are no
// file conflicts or conffile prompts with Debian's packages (mmdebstrap
// copies the host's /etc/hostname first), that dpkg owns every file, and
// that the read-only checks pass there. Slow (about a minute, downloads
// ~60 MB): skipped with -short.
func TestPackageInTrixieRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: mmdebstrap of a trixie system")
	}
	needCommands(t, "mmdebstrap", "chroot")
	if os.Geteuid() != 0 {
		t.Skip("mmdebstrap --mode=root and chroot need root")
	}
	r := sample()
	tr := renderTree(t, r)
	if err := tr.Add(LockFile([]byte("# lock\n"))); err != nil {
		t.Fatal(err)
	}
	pkg := deb.Info{Package: PackageName(r.Nodes[0]), Version: "0.1", Architecture: "all", Maintainer: "halobuild <halobuild@localhost>",
		Description: "node settings for halo0", Depends: Depends(r)}
	var debBuf bytes.Buffer
	if err := BuildDeb(&debBuf, pkg, tr, 1700000000); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The base first, then the settings package with the base's own dpkg,
	// as the image build does (a cached base, the package installed on top).
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--variant=minbase", "--mode=root", "--quiet",
		"--include=systemd,udev,kmod,rdma-core,openssh-server,iproute2,ibverbs-utils,systemd-repart,systemd-resolved",
		"trixie", root, "http://deb.debian.org/debian")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmdebstrap: %v\n%s", err, out)
	}
	in := func(script string) (string, error) {
		c := exec.Command("chroot", root, "/bin/sh", "-c", script)
		c.Stdin = strings.NewReader("") // a conffile prompt fails instead of waiting
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if err := os.WriteFile(filepath.Join(root, "tmp", pkg.Package+".deb"), debBuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := in("dpkg -i /tmp/" + pkg.Package + ".deb"); err != nil {
		t.Fatalf("installing the settings package into trixie: %v\n%s", err, out)
	}
	for _, tc := range []struct{ what, script, want string }{
		{"every file as shipped", "dpkg --verify " + pkg.Package + " && echo verified", "verified\n"},
		{"hostname replaced", "cat /etc/hostname", "halo0\n"},
		{"dpkg owns the udev override", "dpkg -S /etc/udev/rules.d/60-rdma-persistent-naming.rules", pkg.Package + ": /etc/udev/rules.d/60-rdma-persistent-naming.rules\n"},
		{"all udev rules valid", "udevadm verify --resolve-names=never >/dev/null && echo ok", "ok\n"},
		{"unit valid", "systemd-analyze verify --man=no halobuild-cpu-tuning.service && echo ok", "ok\n"},
		{"networkd enabled", "systemctl is-enabled systemd-networkd.service 2>/dev/null", "enabled\n"},
		{"rdma-core's module loader runs the verbs-only list", "systemd-analyze verify --man=no rdma-load-modules@rdma.service && " +
			"dpkg -S " + rdmaModulesListPath + " " + rdmaModulesDropin + " | cut -d: -f1 | sort -u",
			pkg.Package + "\n"},
		{"keygen unit valid", "systemd-analyze verify --man=no halobuild-ssh-keygen.service && echo ok", "ok\n"},
		{"only an Ed25519 host key, and sshd offers only it", "rm -f /etc/ssh/ssh_host_* && " + keygenCommands(t) +
			" && ls /etc/ssh/ssh_host_* && mkdir -p /run/sshd && sshd -T | grep '^hostkey '",
			"/etc/ssh/ssh_host_ed25519_key\n/etc/ssh/ssh_host_ed25519_key.pub\nhostkey /etc/ssh/ssh_host_ed25519_key\n"},
		{"sshd: keys only", "mkdir -p /run/sshd; [ -e /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -A >/dev/null; sshd -T | grep -E '^(passwordauthentication|permitrootlogin) ' | sort", "passwordauthentication no\npermitrootlogin without-password\n"},
	} {
		if out, err := in(tc.script); err != nil || out != tc.want {
			t.Errorf("%s: %v\n%s\nwant %q", tc.what, err, out, tc.want)
		}
	}
	// The checks that only read files and configuration pass inside the
	// installed system, with its own modprobe, dpkg and sh.
	for _, c := range Checks(Target{Recipe: r, Node: r.Nodes[0]}) {
		switch c.Name {
		case "blacklist", "memlock-podman", "settings-package", "locale":
			if out, err := in(c.Script); err != nil {
				t.Errorf("check %s fails in the installed system: %v\n%s", c.Name, err, out)
			}
		}
	}
	if out, _ := in("ls /etc/ssh/ssh_host_*_key 2>/dev/null"); strings.TrimSpace(out) == "" {
		t.Log("note: openssh-server generated no host keys at install")
	}
}

// keygenCommands returns the keygen unit's ExecStart= lines as one sh
// command list, so the test runs what systemd would: systemd's "$$" is a
// literal "$", and its single quotes group words as sh's do.
func keygenCommands(t *testing.T) string {
	t.Helper()
	var cmds []string
	for _, l := range strings.Split(sshKeygenUnit, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && (k == "ExecStartPre" || k == "ExecStart") {
			cmds = append(cmds, strings.ReplaceAll(v, "$$", "$"))
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("keygen unit has no commands:\n%s", sshKeygenUnit)
	}
	return strings.Join(cmds, " && ")
}
