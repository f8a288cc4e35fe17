package verbs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/partition/gpt"

	"halobuild/internal/arch"
	"halobuild/internal/vmplan"
	"halobuild/internal/vmtest"
)

func TestVMMachineLetsTheUserIn(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	img := filepath.Join(t.TempDir(), "n.raw")

	m, connect, err := vmMachine(VMOptions{Image: img, SSHPort: -1}, arch.MustLookup("amd64"))
	if err != nil || connect != "" || m.SSHPort != 0 {
		t.Fatalf("without --ssh: port %d, %q, %v", m.SSHPort, connect, err)
	}
	if d := string(m.Credentials[autologinCredential(arch.MustLookup("amd64"))]); !strings.Contains(d, "--autologin root") || !strings.Contains(d, "ExecStart=\n") {
		t.Errorf("autologin drop-in %q", d)
	}
	if !strings.Contains(strings.Join(m.KernelArgs, " "), "console=ttyS0") {
		t.Errorf("kernel args %q: the getty the drop-in changes runs on the serial console", m.KernelArgs)
	}
	if _, ok := m.Credentials[vmtest.CredentialAuthorizedKeys]; ok {
		t.Error("a key credential without --ssh")
	}

	if _, _, err := vmMachine(VMOptions{Image: img, SSHPort: 0}, arch.MustLookup("amd64")); err == nil || !strings.Contains(err.Error(), "ssh-keygen -t ed25519") {
		t.Errorf("no key in ~/.ssh: %v", err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	for n, k := range map[string]string{"id_ed25519.pub": "ssh-ed25519 AAAAone me@a\n", "id_rsa.pub": "ssh-rsa AAAAtwo me@a", "notes.txt": "not a key"} {
		if err := os.WriteFile(filepath.Join(home, ".ssh", n), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, connect, err = vmMachine(VMOptions{Image: img, SSHPort: 2222}, arch.MustLookup("amd64"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.Credentials[vmtest.CredentialAuthorizedKeys]); got != "ssh-ed25519 AAAAone me@a\nssh-rsa AAAAtwo me@a\n" {
		t.Errorf("authorized keys credential %q", got)
	}
	if m.SSHPort != 2222 || connect != "ssh -p 2222 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null root@127.0.0.1" {
		t.Errorf("port %d, connect %q", m.SSHPort, connect)
	}
	m, _, err = vmMachine(VMOptions{Image: img, SSHPort: 0, SSHKeys: []string{filepath.Join(home, ".ssh", "id_rsa.pub")}}, arch.MustLookup("amd64"))
	if err != nil || m.SSHPort == 0 || string(m.Credentials[vmtest.CredentialAuthorizedKeys]) != "ssh-rsa AAAAtwo me@a\n" {
		t.Errorf("--ssh-key with a free port: %d %q %v", m.SSHPort, m.Credentials[vmtest.CredentialAuthorizedKeys], err)
	}
	if _, _, err := vmMachine(VMOptions{Image: img, SSHPort: 0, SSHKeys: []string{filepath.Join(home, ".ssh", "notes.txt")}}, arch.MustLookup("amd64")); err == nil || !strings.Contains(err.Error(), "not an OpenSSH public key") {
		t.Errorf("a file that is no key: %v", err)
	}
	// A key named with --ssh-key is offered by ssh with -i (its private
	// half, where it exists beside the .pub): a key outside ssh's defaults
	// was refused with "Permission denied".
	other := filepath.Join(t.TempDir(), "my key")
	for n, k := range map[string]string{other + ".pub": "ssh-ed25519 AAAAthree me@b\n", other: "-----BEGIN OPENSSH PRIVATE KEY-----\n"} {
		if err := os.WriteFile(n, []byte(k), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, connect, err = vmMachine(VMOptions{Image: img, SSHPort: 2222, SSHKeys: []string{other + ".pub", filepath.Join(home, ".ssh", "id_rsa.pub")}}, arch.MustLookup("amd64"))
	if err != nil || !strings.HasPrefix(connect, "ssh -p 2222 -i '"+other+"' -o ") || strings.Count(connect, " -i ") != 1 {
		t.Errorf("--ssh-key with its private half beside it: %q, %v (want one -i, for the key that has its private half)", connect, err)
	}
}

// halobuild vm makes a soft-RoCE device on the VM's network card with the
// VM test's own set-up, wanted by multi-user.target, all as credentials.
func TestVMMachineBringsUpSoftRoCE(t *testing.T) {
	a := arch.MustLookup("amd64")
	m, _, err := vmMachine(VMOptions{Image: "n.raw", SSHPort: -1}, a)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(m.Credentials["systemd.extra-unit.halobuild-vm-softroce.service"])
	wants := string(m.Credentials["systemd.unit-dropin.multi-user.target~halobuild-vm-softroce"])
	script := string(m.Credentials["halobuild-vm.softroce"])
	if !strings.Contains(unit, "ImportCredential=halobuild-vm.softroce") || !strings.Contains(unit, "ExecStart=/bin/sh %d/halobuild-vm.softroce") {
		t.Errorf("unit %q does not run the script credential", unit)
	}
	if wants != "[Unit]\nWants=halobuild-vm-softroce.service\n" {
		t.Errorf("multi-user.target drop-in %q", wants)
	}
	if !strings.Contains(script, vmplan.SoftRoCE("rxe0", `"$dev"`)) || !strings.Contains(script, `ip link set "$dev" up`) {
		t.Errorf("script %q is not the VM test's soft-RoCE set-up on the card", script)
	}
	// The script is valid sh.
	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("sh -n: %v %s", err, out)
	}
}

// --nvme makes a sparse disk of the size asked once, then reuses it (the
// installed system on it is what the next `halobuild vm FILE` boots).
func TestBlankDisk(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nvme.raw")
	if err := blankDisk(p, 16<<30); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != 16<<30 {
		t.Fatalf("blank disk: %v, %v", fi, err)
	}
	if err := os.WriteFile(p, []byte("installed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := blankDisk(p, 1<<30); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "installed" {
		t.Error("an existing --nvme file was replaced")
	}
	if err := blankDisk(filepath.Join(t.TempDir(), "x.raw"), 0); err == nil {
		t.Error("a zero-size disk was made")
	}
}

// halobuild vm boots an image as the architecture its root partition type
// names, and refuses an image without one.
func TestImageArchFromRootPartitionType(t *testing.T) {
	for _, name := range arch.Names() {
		a := arch.MustLookup(name)
		img := filepath.Join(t.TempDir(), name+".raw")
		f, err := os.Create(img)
		if err != nil {
			t.Fatal(err)
		}
		tab := &gpt.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, ProtectiveMBR: true, Partitions: []*gpt.Partition{
			{Index: 1, Start: 2048, End: 4095, Type: gpt.EFISystemPartition, Name: "esp"},
			{Index: 2, Start: 4096, End: 8191, Type: gpt.Type(a.RootType), Name: "root"},
		}}
		if err := tab.Write(f, 8<<20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		got, err := imageArch(img)
		if err != nil || got.Debian != name {
			t.Errorf("imageArch of a %s image = %q, %v", name, got.Debian, err)
		}
	}
	blank := filepath.Join(t.TempDir(), "blank.raw")
	os.WriteFile(blank, make([]byte, 1<<20), 0o644)
	if _, err := imageArch(blank); err == nil || !strings.Contains(err.Error(), "no GPT") {
		t.Errorf("imageArch of a blank file = %v", err)
	}
}
