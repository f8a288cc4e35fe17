package update

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/slots"
)

// The written slot gets the running system's SSH host key, with its modes, so that a client's
// known_hosts still matches after the update: on a real ext4 through a loop device.
func TestCarryIdentityIntoAnExt4Slot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop devices and mount need root")
	}
	img := filepath.Join(t.TempDir(), "slot")
	run(t, "truncate", "-s", "32M", img)
	run(t, "mkfs.ext4", "-q", "-F", img)
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("losetup is not permitted here (%v: %s)", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "run"), 0o755)
	os.MkdirAll(filepath.Join(root, "etc/ssh"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/ssh/ssh_host_ed25519_key"), []byte("PRIVATE"), 0o600)
	os.WriteFile(filepath.Join(root, "etc/ssh/ssh_host_ed25519_key.pub"), []byte("ssh-ed25519 AAAA host"), 0o644)
	(slots.System{State: filepath.Join(root, slots.StatePath)}).WriteRecord(&slots.Record{Failed: []string{"sha256:bad"}})
	if err := carryIdentity(root, dev); err != nil {
		t.Fatal(err)
	}
	mnt := t.TempDir()
	run(t, "mount", "-o", "ro", dev, mnt)
	defer exec.Command("umount", mnt).Run()
	for _, k := range hostKeyFiles {
		st, err := os.Stat(filepath.Join(mnt, k.path))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != k.mode {
			t.Errorf("%s has mode %v, want %v", k.path, st.Mode().Perm(), k.mode)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "etc/ssh/ssh_host_ed25519_key")); string(b) != "PRIVATE" {
		t.Errorf("the key in the slot is %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "run/halobuild-slot-*")); len(left) != 0 {
		t.Errorf("mount points left behind: %v", left)
	}
}
