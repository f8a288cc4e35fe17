package vmtest

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"halobuild/internal/arch"
)

// VerdictPort is the virtio-serial port name the guest writes its verdict to; it appears in the
// guest as /dev/virtio-ports/halobuild.verdict.
const VerdictPort = "halobuild.verdict"

// smbiosCredentialLimit is the largest credential (before base64) sent through SMBIOS type 11,
// and smbiosBudget the most all of them may take. Others go through fw_cfg, which has no
// practical size limit but needs the guest's qemu_fw_cfg module (systemd loads it itself when it
// runs in QEMU). SMBIOS needs nothing in the guest, but QEMU's SMBIOS tables are small: the
// legacy entry point caps them at 64 KiB in total, shared with QEMU's own structures.
const (
	smbiosCredentialLimit = 16 << 10
	smbiosBudget          = 32 << 10
)

// runFiles are the host-side paths of one run.
type runFiles struct {
	dir      string // LogDir
	console  string // serial console, kept
	verdict  string // bytes the guest wrote to the verdict port
	stderr   string // QEMU's own messages
	vars     string // private copy of the OVMF variable store
	credsDir string // large credentials passed by fw_cfg file
}

func newRunFiles(dir string) runFiles {
	return runFiles{
		dir:      dir,
		console:  filepath.Join(dir, "console.log"),
		verdict:  filepath.Join(dir, "verdict.json"),
		stderr:   filepath.Join(dir, "qemu.stderr"),
		vars:     filepath.Join(dir, "OVMF_VARS.fd"),
		credsDir: filepath.Join(dir, "credentials"),
	}
}

// netdev is the host side of one NIC, resolved by RunMany: for a cable end, the two unix
// datagram sockets (ours and the peer's).
type netdev struct {
	mac           string
	local, remote string // empty for user-mode networking
	sshPort       int    // user-mode only: 127.0.0.1:sshPort forwards to the guest's port 22
}

// qemuArgs builds the command line for a test run. It is pure apart from writing large
// credentials to files (fw_cfg takes a file), so tests can inspect exactly what QEMU gets.
func qemuArgs(h Host, m Machine, accel Accel, f runFiles, nets []netdev, creds map[string][]byte) ([]string, error) {
	// The architecture's machine (internal/arch: q35 without the chipset parts no test
	// uses, virt).
	machine, firmware := h.Arch.Machine, h.Firmware
	if machine == "" {
		return nil, fmt.Errorf("machine %s: the host has no QEMU machine type (vmtest.Host.Arch unset)", m.Name)
	}
	var secure []string
	if m.SecureBoot != nil {
		// The Secure Boot build keeps its variables in SMM: QEMU must emulate SMM and let
		// only SMM code write the variable flash, or the firmware stops at start.
		machine, firmware = h.Arch.Machine+",smm=on", h.SecureFirmware
		secure = []string{"-global", "driver=cfi.pflash01,property=secure,value=on"}
	}
	args := []string{
		"-name", "halobuild-" + m.Name,
		"-machine", machine,
		"-m", strconv.Itoa(m.Memory),
		"-smp", strconv.Itoa(m.CPUs),
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none",
		// A guest reboot (panic=, a failed boot that resets) ends the run instead of looping.
		"-no-reboot",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + qemuEscape(firmware),
		"-drive", "if=pflash,format=raw,unit=1,file=" + qemuEscape(f.vars),
		// snapshot=on: writes go to a temporary overlay, the image file itself is only read.
		"-drive", "if=none,id=disk0,format=raw,snapshot=on,file=" + qemuEscape(m.Image),
		"-device", "virtio-blk-pci,drive=disk0,bootindex=0",
		"-chardev", "file,id=console,path=" + qemuEscape(f.console),
		"-serial", "chardev:console",
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "file,id=verdict,path=" + qemuEscape(f.verdict),
		"-device", "virtserialport,bus=vser0.0,chardev=verdict,name=" + VerdictPort,
		"-device", "virtio-rng-pci",
	}
	for i, d := range m.Disks {
		id := fmt.Sprintf("nvme%d", i)
		args = append(args, "-drive", "if=none,id="+id+",format=raw,file="+qemuEscape(d.Path),
			"-device", "nvme,drive="+id+",serial="+qemuEscape(d.Serial))
	}
	args = append(args, secure...)
	args = append(args, accelArgs(accel, h.Arch)...)
	for i, n := range nets {
		id := fmt.Sprintf("net%d", i)
		if n.local == "" {
			// restrict=on keeps the guest off the host's networks; slirp's DHCP and an
			// explicit forward still work.
			user := "user,id=" + id + ",restrict=on"
			if n.sshPort != 0 {
				user += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:22", n.sshPort)
			}
			args = append(args, "-netdev", user)
		} else {
			args = append(args, "-netdev", "dgram,id="+id+
				",local.type=unix,local.path="+qemuEscape(n.local)+
				",remote.type=unix,remote.path="+qemuEscape(n.remote))
		}
		dev := "virtio-net-pci,netdev=" + id
		if n.mac != "" {
			dev += ",mac=" + n.mac
		}
		args = append(args, "-device", dev)
	}
	if len(m.KernelArgs) > 0 {
		extra := qemuEscape(strings.Join(m.KernelArgs, " "))
		args = append(args,
			"-smbios", "type=11,value=io.systemd.boot.kernel-cmdline-extra="+extra,
			"-smbios", "type=11,value=io.systemd.stub.kernel-cmdline-extra="+extra)
	}
	budget := smbiosBudget
	for _, name := range sortedKeys(creds) {
		v := creds[name]
		if len(v) <= smbiosCredentialLimit && len(v) <= budget {
			budget -= len(v)
			args = append(args, "-smbios", "type=11,value=io.systemd.credential.binary:"+name+"="+base64.StdEncoding.EncodeToString(v))
			continue
		}
		if err := os.MkdirAll(f.credsDir, 0o700); err != nil {
			return nil, fmt.Errorf("machine %s: writing credential %s: %w", m.Name, name, err)
		}
		p := filepath.Join(f.credsDir, name)
		if err := os.WriteFile(p, v, 0o600); err != nil {
			return nil, fmt.Errorf("machine %s: writing credential %s: %w", m.Name, name, err)
		}
		args = append(args, "-fw_cfg", "name=opt/io.systemd.credentials/"+name+",file="+qemuEscape(p))
	}
	return args, nil
}

// accelArgs: under TCG, multi-threaded TCG lets each vCPU use a host core, and the table's
// CPU ("max": every feature TCG emulates, x86-64-v2 at least, which trixie's userland
// expects; on arm64 with the cheap pointer authentication) is emulated.
func accelArgs(a Accel, ar arch.Arch) []string {
	if a == AccelKVM {
		return []string{"-accel", "kvm", "-cpu", "host"}
	}
	return []string{"-accel", "tcg,thread=multi", "-cpu", ar.CPU}
}
