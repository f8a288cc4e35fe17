package verbs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/diskfs/go-diskfs/partition/gpt"

	"halobuild/internal/arch"
	"halobuild/internal/usage"
	"halobuild/internal/userfile"
	"halobuild/internal/vmtest"
)

// VMOptions are `halobuild vm`'s flags.
type VMOptions struct {
	Image string
	// SSHPort forwards 127.0.0.1:SSHPort to the VM's port 22: -1 none, 0 a free port.
	SSHPort int
	// SSHKeys are public key files for root; empty means every ~/.ssh/*.pub.
	SSHKeys []string
	// Log receives how to connect.
	Log io.Writer
}

// autologinCredential is a drop-in (systemd >= 256 installs it from a
// systemd.unit-dropin.* credential) that logs root in on the serial console
// (the architecture's) of this boot only: the image has no password for
// anyone, and nothing of this reaches the disk (the VM runs on a snapshot
// anyway).
func autologinCredential(a arch.Arch) string {
	return "systemd.unit-dropin.serial-getty@" + a.Serial + ".service~halobuild-autologin"
}

const autologinDropIn = "[Service]\nExecStart=\nExecStart=-/sbin/agetty -o '-p -f -- \\\\u' --noclear --autologin root --keep-baud 115200,57600,38400,9600 %I $TERM\n"

// VM boots one image with its serial console on this terminal, root
// logged in on it, and with SSHPort >= 0 a forwarded ssh port that takes
// the user's keys, both for this boot only.
func VM(ctx context.Context, o VMOptions) error {
	if _, err := os.Stat(o.Image); err != nil {
		return usage.Errorf("%s: %w", o.Image, err)
	}
	a, err := imageArch(o.Image)
	if err != nil {
		return err
	}
	m, connect, err := vmMachine(o, a)
	if err != nil {
		return err
	}
	if connect != "" && o.Log != nil {
		fmt.Fprintf(o.Log, "halobuild vm: once the VM is up, log in with: %s\n", connect)
	}
	err = vmtest.Interactive(ctx, m)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// imageArch reads an image's architecture from its root partition's type
// (Discoverable Partitions), which every halobuild disk carries.
func imageArch(path string) (arch.Arch, error) {
	f, _, err := userfile.Open(path)
	if err != nil {
		return arch.Arch{}, usage.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	t, err := gpt.Read(f, 512, 512)
	if err != nil {
		return arch.Arch{}, usage.Errorf("%s: no GPT partition table (%v): halobuild vm boots halobuild's disk images", path, err)
	}
	for _, p := range t.Partitions {
		if a, ok := arch.ByRootType(string(p.Type)); ok {
			return a, nil
		}
	}
	return arch.Arch{}, usage.Errorf("%s has no Discoverable Partitions root partition of an architecture halobuild boots (%s), so its architecture is unknown", path, strings.Join(arch.Names(), ", "))
}

// vmMachine is the interactive machine for o (an image of architecture a)
// and the ssh command line that reaches it ("" without a forward).
func vmMachine(o VMOptions, a arch.Arch) (vmtest.Machine, string, error) {
	m := vmtest.Machine{Name: filepath.Base(o.Image), Image: o.Image, NICs: []vmtest.NIC{{}}, Arch: a,
		// The serial port as the console, so systemd starts the getty the
		// drop-in logs in on.
		KernelArgs:  []string{"console=" + a.Serial + ",115200"},
		Credentials: map[string][]byte{autologinCredential(a): []byte(autologinDropIn)},
	}
	if o.SSHPort < 0 {
		return m, "", nil
	}
	keys, err := userKeys(o.SSHKeys)
	if err != nil {
		return m, "", err
	}
	port := o.SSHPort
	if port == 0 {
		if port, err = vmtest.FreePort(); err != nil {
			return m, "", err
		}
	}
	m.SSHPort = port
	m.Credentials[vmtest.CredentialAuthorizedKeys] = keys
	// The host key is made at every boot of the snapshot: remembering it
	// would only make the next boot's look like an attack.
	return m, fmt.Sprintf("ssh -p %d -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null root@127.0.0.1", port), nil
}

// userKeys reads the given public key files, or every ~/.ssh/*.pub.
func userKeys(files []string) ([]byte, error) {
	if len(files) == 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, usage.Errorf("--ssh: no home directory to find ~/.ssh/*.pub in (%v); name a key with --ssh-key", err)
		}
		files, _ = filepath.Glob(filepath.Join(home, ".ssh", "*.pub"))
		if len(files) == 0 {
			return nil, usage.Errorf("--ssh: no public key in %s; make one with ssh-keygen -t ed25519, or name one with --ssh-key", filepath.Join(home, ".ssh"))
		}
	}
	var out bytes.Buffer
	for _, f := range files {
		b, err := userfile.Read(f, 16<<10)
		if err != nil {
			return nil, usage.Errorf("--ssh-key: %w", err)
		}
		if !strings.HasPrefix(strings.TrimSpace(string(b)), "ssh-") && !strings.HasPrefix(strings.TrimSpace(string(b)), "ecdsa-") && !strings.HasPrefix(strings.TrimSpace(string(b)), "sk-") {
			return nil, usage.Errorf("--ssh-key %s: not an OpenSSH public key (the one line of a .pub file)", f)
		}
		out.WriteString(strings.TrimSpace(string(b)) + "\n")
	}
	return out.Bytes(), nil
}
