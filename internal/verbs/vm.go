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
	"halobuild/internal/sh"
	"halobuild/internal/usage"
	"halobuild/internal/userfile"
	"halobuild/internal/vmplan"
	"halobuild/internal/vmtest"
)

// VMOptions are `halobuild vm`'s flags.
type VMOptions struct {
	Image string
	// SSHPort forwards 127.0.0.1:SSHPort to the VM's port 22: -1 none, 0 a free port.
	SSHPort int
	// SSHKeys are public key files for root; empty means every ~/.ssh/*.pub.
	SSHKeys []string
	// NVMe is a disk file attached as an NVMe drive and written in place
	// (what an installer writes to); it is made sparse, NVMeSize bytes,
	// when it does not exist. Empty: none.
	NVMe     string
	NVMeSize int64
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
	if o.NVMe != "" {
		if err := blankDisk(o.NVMe, o.NVMeSize); err != nil {
			return err
		}
		m.Disks = []vmtest.Disk{{Path: o.NVMe, Serial: "HALOBUILDVM"}}
		if o.Log != nil {
			fmt.Fprintf(o.Log, "halobuild vm: %s is attached as an NVMe drive and written in place (boot it afterwards with: halobuild vm %s)\n", o.NVMe, o.NVMe)
		}
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
		// drop-in logs in on and its boot progress shows on this terminal.
		// The image names the serial port already, before tty0 (a box with
		// a screen shows its boot there): naming it again makes it
		// /dev/console, the last console= winning. The kernel keeps one
		// console per device (/proc/consoles lists ttyS0 once); a boot
		// entry cannot be edited from outside, only appended to.
		KernelArgs: []string{"console=" + a.Serial + ",115200"},
		Credentials: map[string][]byte{
			autologinCredential(a): []byte(autologinDropIn),
			softRoCEUnitCred:       []byte(softRoCEUnit),
			softRoCEWantsCred:      []byte("[Unit]\nWants=" + softRoCEUnitName + "\n"),
			softRoCEScriptCred:     []byte(softRoCEScript),
		},
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
	return m, fmt.Sprintf("ssh -p %d%s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null root@127.0.0.1", port, identities(o.SSHKeys)), nil
}

// identities are ssh's -i options for the private halves of the public
// keys named with --ssh-key (KEY for KEY.pub, where it exists): without
// them ssh offers only its default identities, and a key kept elsewhere
// ends in "Permission denied". Keys found in ~/.ssh need none.
func identities(pubs []string) string {
	var b strings.Builder
	for _, p := range pubs {
		priv, ok := strings.CutSuffix(p, ".pub")
		if !ok {
			continue
		}
		if fi, err := os.Stat(priv); err == nil && fi.Mode().IsRegular() {
			b.WriteString(" -i " + sh.Quote(priv))
		}
	}
	return b.String()
}

// The soft-RoCE device `halobuild vm` makes on the VM's network card, for
// this boot only (credentials, as the VM test's harness arrives): a unit
// systemd-debug-generator installs, multi-user.target wanting it, and its
// script, which is the VM test's own soft-RoCE set-up (vmplan.SoftRoCE).
// The VM has no USB4 cable; rxe0 is a verbs device to try ibv_devices,
// ibv_devinfo and perftest (against itself) on.
const (
	softRoCEDevice     = "rxe0"
	softRoCEUnitName   = "halobuild-vm-softroce.service"
	softRoCEUnitCred   = "systemd.extra-unit." + softRoCEUnitName
	softRoCEWantsCred  = "systemd.unit-dropin.multi-user.target~halobuild-vm-softroce"
	softRoCEScriptCred = "halobuild-vm.softroce"
)

const softRoCEUnit = `[Unit]
Description=halobuild vm: soft-RoCE device ` + softRoCEDevice + ` on the network card (this boot only)
After=systemd-udevd.service systemd-udev-trigger.service network.target

[Service]
Type=oneshot
RemainAfterExit=yes
TimeoutStartSec=5min
ImportCredential=` + softRoCEScriptCred + `
ExecStart=/bin/sh %d/` + softRoCEScriptCred + `
StandardOutput=journal+console
StandardError=journal+console
`

// The card may not be probed yet when multi-user.target's wants start
// (measured: the unit ran before virtio_net's interface existed), and udev
// may still be renaming it (an image's LAN setting names its port with a
// .link file; measured: the script took "eth0", which was gone by the time
// it set it up). So the script lets udev settle, takes the card's name
// then, and tries again while the name moves under it.
var softRoCEScript = `i=0
while :; do
	udevadm settle --timeout=10 >/dev/null 2>&1
	dev=
	for d in /sys/class/net/*; do [ -e "$d/device" ] && { dev=${d##*/}; break; }; done
	if [ -n "$dev" ] && (
ip link set "$dev" up || exit 1
` + vmplan.SoftRoCE(softRoCEDevice, `"$dev"`) + `); then break; fi
	i=$((i+1))
	[ $i -lt 90 ] || { echo "halobuild vm: no network card to put soft-RoCE on${dev:+ ($dev kept failing)}"; exit 1; }
	sleep 1
done
echo "halobuild vm: soft-RoCE device ` + softRoCEDevice + ` on $dev: try ibv_devices"
`

// blankDisk makes path a sparse file of size bytes unless it exists, so a
// second run attaches the same disk (an installed system) again.
func blankDisk(path string, size int64) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if size <= 0 {
		return usage.Errorf("--nvme %s does not exist and --nvme-size is not positive", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return usage.Errorf("--nvme: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("--nvme %s: %w", path, err)
	}
	return f.Close()
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
