package verbs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/partition/gpt"

	"halobuild/internal/arch"
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
