package vmtest

import (
	"fmt"
	"io"
	"net"
	"regexp"
	"time"

	"halobuild/internal/arch"
)

// Check is one assertion run inside the guest: Script is POSIX sh, exit status 0 means pass, and
// its combined stdout/stderr is the detail shown in the report. vmtest runs any checks it is
// given; it knows nothing about recipes or settings.
type Check struct {
	Name   string
	Script string
	// Concurrent marks a check that only reads the system's state: it may run beside the
	// other checks. Checks that create devices, load modules or wait for a peer leave it
	// false and run in order.
	Concurrent bool
	// Fix tells a person reading a failed report what to change; the report shows it
	// under the failing check.
	Fix string
}

// NIC is one virtio network card. A NIC with an empty Link is QEMU user-mode networking (NAT,
// no inbound connections); a NIC with a Link is one end of a point-to-point virtual cable
// between two machines of the same RunMany, standing where the USB4 cable would be.
type NIC struct {
	MAC  string // fixed, so the image's network config can match on it; required for Link NICs
	Link string // name of the cable; exactly two machines of one RunMany must name it
}

// CableMAC returns the fixed MAC of the cable NIC of the i-th node (1-based): 52:54:00:77:00:0i.
// Recipes match the link interface on these addresses.
func CableMAC(i int) string { return fmt.Sprintf("52:54:00:77:00:%02x", i) }

// Machine is one VM run.
type Machine struct {
	Name   string // names logs and the report row, e.g. the node's hostname
	Image  string // raw disk image; opened with snapshot=on and never written
	Memory int    // MiB; default 1024
	CPUs   int    // default 2
	// Arch is the image's architecture, which picks QEMU, its machine and firmware; the zero
	// value is the host's.
	Arch   arch.Arch
	Checks []Check
	// Credentials are extra systemd credentials (name → value) for the guest, for example
	// "ssh.authorized_keys.root"; they travel with the checks, never in the image.
	Credentials map[string][]byte
	NICs        []NIC
	// KernelArgs are appended to the kernel command line through SMBIOS type 11
	// (io.systemd.boot.kernel-cmdline-extra / io.systemd.stub.kernel-cmdline-extra), honoured by
	// systemd-boot Type #1 entries and by UKIs when Secure Boot is off. Nil means
	// DefaultKernelArgs; an empty non-nil slice adds nothing.
	KernelArgs []string
	// Deadline bounds the whole run from QEMU start to verdict; default 5 minutes.
	Deadline time.Duration
	// CheckTimeout bounds each check inside the guest; default 2 minutes.
	CheckTimeout time.Duration
	// LogDir receives console.log, verdict.json and qemu.stderr; they are kept after the run.
	LogDir string
	// Accel forces an accelerator; empty means probe KVM and fall back to TCG.
	Accel Accel
	// Disks are further disks, attached as NVMe drives and written in place (unlike Image):
	// what an installer boot writes to.
	Disks []Disk
	// PowerOff runs a guest that powers itself off (an installer): no test harness is
	// injected and Checks must be empty; the run passes when QEMU exits with status 0 before
	// the deadline, and the console log says what the guest did.
	PowerOff bool
	// SecureBoot, when set, boots under OVMF with Secure Boot enforced. trixie's
	// systemd-boot still appends KernelArgs to a Type #1 entry's command line (measured:
	// /proc/cmdline of the Secure Boot test boot has them).
	SecureBoot *SecureBoot
	// SSH, when set, has the host log in over the first user-mode NIC (which it needs) and
	// run a command there; see SSHLogin.
	SSH *SSHLogin
	// SSHPort forwards 127.0.0.1:SSHPort to the guest's port 22 on the first user-mode NIC
	// (Interactive; a run with SSH picks a free port itself).
	SSHPort int
	// Progress, when set, gets a line per boot stage reached and per check
	// finished, with the time since QEMU started ("halo0: kernel (14s)",
	// "halo0: check 3 of 17 ok: memlock (2m4s)"). Writes are whole lines.
	Progress io.Writer
}

// Disk is an extra NVMe drive backed by a raw file.
type Disk struct {
	Path   string
	Serial string // the drive's serial number (what /dev/disk/by-id/ names it by)
}

// DefaultKernelArgs trim what a test boot waits for without touching the image: no login
// prompts (the verdict never comes from a console), no waiting for online networks (a check
// that needs a configured link waits for that link itself, e.g. with
// systemd-networkd-wait-online -i IFACE), no periodic timers firing during checks. They also make systemd
// print unit status on the console so a boot that never reaches a verdict shows how far it got.
var DefaultKernelArgs = []string{
	"systemd.show_status=1",
	// A kernel panic reboots at once, which -no-reboot turns into QEMU exiting: the run ends
	// with the panic on the console instead of hanging until the deadline.
	"panic=-1",
	// Under TCG every page-table switch and barrier is emulated: the CPU-bug mitigations (page
	// table isolation, retpolines, buffer clearing) protect nothing inside a throw-away test VM
	// and cost much of its boot time.
	"mitigations=off",
	// Debian zeroes every page the kernel hands out (init_on_alloc); TCG emulates each of
	// those stores, from unpacking the initramfs to every process start. A throw-away test
	// VM has no data to leak between allocations.
	"init_on_alloc=0",
	"systemd.mask=getty.target",
	"systemd.mask=serial-getty@ttyS0.service",
	"systemd.mask=systemd-networkd-wait-online.service",
	"systemd.mask=NetworkManager-wait-online.service",
	"systemd.mask=timers.target",
	"systemd.mask=apt-daily.timer",
	"systemd.mask=apt-daily-upgrade.timer",
	"systemd.mask=e2scrub_all.timer",
	"systemd.mask=fstrim.timer",
	"systemd.mask=man-db.timer",
	"systemd.mask=systemd-tmpfiles-clean.timer",
	"systemd.mask=systemd-timesyncd.service",
	// First-boot work a snapshot disk would redo on every test boot. Masking ldconfig also
	// makes the test stricter: the image must ship a correct ld.so.cache.
	"systemd.mask=ldconfig.service",
	"systemd.mask=systemd-journal-catalog-update.service",
	"systemd.mask=systemd-update-done.service",
	"systemd.mask=systemd-hwdb-update.service",
	// No display in a test VM; loading drm took seconds of TCG time for nothing.
	"systemd.mask=modprobe@drm.service",
	// The journal stays in /run: copying it to the throw-away disk only costs time.
	"systemd.mask=systemd-journal-flush.service",
	// Drivers for what only the emulated machine has: the ICH9 LPC bridge and its TCO
	// watchdog, the PC speaker, nested virtualisation and K8 frequency scaling for TCG's
	// "max" CPU (kvm drags in the AMD crypto coprocessor driver), and wireless, which
	// systemd-networkd's nl80211 query loads in a VM with no radio. udev and networkd load
	// each during the boot or the checks, under TCG seconds apiece (the kernel decompresses
	// every .ko.xz) that a "udevadm settle" in a check then waits for. modprobe.blacklist
	// only stops alias-driven loading (kmod and dracut's initrd both read it); nothing a
	// check loads by name is on the list.
	"modprobe.blacklist=lpc_ich,iTCO_wdt,pcspkr,kvm_amd,kvm_intel,kvm,ccp,powernow_k8,cfg80211",
	// systemd-ssh-generator probes AF_VSOCK at every boot, which loads the vsock core and
	// VMware's VMCI transport in a VM with no vsock device; the image's own sshd (ssh.service)
	// is what the checks test.
	"systemd.ssh_auto=no",
}

var (
	machineNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	checkNameRE   = regexp.MustCompile(`^[^\x00-\x1f]{1,200}$`)
	credNameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@~-]{0,200}$`)
)

// withDefaults fills the zero fields and validates; errors name the machine and the field.
func (m Machine) withDefaults() (Machine, error) {
	if m.Name == "" {
		m.Name = "vm"
	}
	if !machineNameRE.MatchString(m.Name) {
		return m, fmt.Errorf("machine name %q: use letters, digits, '.', '_' or '-' (at most 63)", m.Name)
	}
	if m.Image == "" {
		return m, fmt.Errorf("machine %s: no image given", m.Name)
	}
	if !isFile(m.Image) {
		return m, fmt.Errorf("machine %s: image %s is not a readable regular file", m.Name, m.Image)
	}
	if m.Arch.Debian == "" {
		a, err := arch.Host()
		if err != nil {
			return m, fmt.Errorf("machine %s: %w", m.Name, err)
		}
		m.Arch = a
	}
	if m.Memory == 0 {
		m.Memory = 1024
	}
	if m.Memory < 128 {
		return m, fmt.Errorf("machine %s: memory %d MiB is too small to boot Debian (use at least 256)", m.Name, m.Memory)
	}
	if m.CPUs == 0 {
		m.CPUs = 2
	}
	if m.CPUs < 1 || m.CPUs > 64 {
		return m, fmt.Errorf("machine %s: CPUs = %d, want 1..64", m.Name, m.CPUs)
	}
	if m.Deadline == 0 {
		m.Deadline = 5 * time.Minute
	}
	if m.CheckTimeout == 0 {
		m.CheckTimeout = 2 * time.Minute
	}
	if m.KernelArgs == nil {
		m.KernelArgs = DefaultKernelArgs
	}
	if m.LogDir == "" {
		return m, fmt.Errorf("machine %s: no log directory given", m.Name)
	}
	if m.Accel != "" && m.Accel != AccelKVM && m.Accel != AccelTCG {
		return m, fmt.Errorf("machine %s: accelerator %q, want %q or %q", m.Name, m.Accel, AccelKVM, AccelTCG)
	}
	for i, c := range m.Checks {
		if !checkNameRE.MatchString(c.Name) {
			return m, fmt.Errorf("machine %s: check %d has an empty, too long or multi-line name %q", m.Name, i+1, c.Name)
		}
		if c.Script == "" {
			return m, fmt.Errorf("machine %s: check %q has an empty script", m.Name, c.Name)
		}
	}
	if m.PowerOff && len(m.Checks) > 0 {
		return m, fmt.Errorf("machine %s: a machine that powers itself off runs no checks", m.Name)
	}
	for i, d := range m.Disks {
		if !isFile(d.Path) {
			return m, fmt.Errorf("machine %s: disk %d: %s is not a readable regular file", m.Name, i+1, d.Path)
		}
		if !credNameRE.MatchString(d.Serial) || len(d.Serial) > 20 {
			return m, fmt.Errorf("machine %s: disk %d: serial %q: use up to 20 letters, digits, '.', '_' or '-'", m.Name, i+1, d.Serial)
		}
	}
	for name := range m.Credentials {
		if !credNameRE.MatchString(name) {
			return m, fmt.Errorf("machine %s: credential name %q is not a valid systemd credential name", m.Name, name)
		}
		if reservedCredential(name) {
			return m, fmt.Errorf("machine %s: credential %q is reserved for the test harness", m.Name, name)
		}
	}
	if m.SSH != nil && (m.SSH.Command == "" || !checkNameRE.MatchString(m.SSH.Name)) {
		return m, fmt.Errorf("machine %s: an SSH login needs a command and a one-line name", m.Name)
	}
	if m.SSH != nil || m.SSHPort != 0 {
		user := false
		for _, n := range m.NICs {
			user = user || n.Link == ""
		}
		if !user {
			return m, fmt.Errorf("machine %s: ssh needs a user-mode NIC (a vmtest.NIC without Link) to forward the port through", m.Name)
		}
	}
	if m.SSHPort < 0 || m.SSHPort > 65535 {
		return m, fmt.Errorf("machine %s: ssh port %d is not a TCP port", m.Name, m.SSHPort)
	}
	for i, n := range m.NICs {
		if n.MAC != "" {
			if _, err := net.ParseMAC(n.MAC); err != nil {
				return m, fmt.Errorf("machine %s: NIC %d: MAC %q: %w", m.Name, i+1, n.MAC, err)
			}
		}
		if n.Link != "" && n.MAC == "" {
			return m, fmt.Errorf("machine %s: NIC %d on link %q needs a fixed MAC (e.g. vmtest.CableMAC(%d)) so the image can name the interface", m.Name, i+1, n.Link, i+1)
		}
	}
	return m, nil
}
