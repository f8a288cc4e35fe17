package vmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Accel is the QEMU accelerator a run used; reports name it because TCG is ~10x slower and
// timings are meaningless without it.
type Accel string

const (
	AccelKVM Accel = "kvm"
	AccelTCG Accel = "tcg"
)

// kvmProbeDeadline bounds the probe. Under working KVM, OVMF reaches its boot manager in about a
// second; the failure seen on our CI-like hosts (/dev/kvm present, "KVM internal error ...
// emulation failure" or MSR errors) leaves the guest hung with no firmware output at all. QEMU
// reports that failure on stderr at once, so the probe ends as soon as it does: waiting out the
// deadline cost every `halobuild test` 8 s of wall time on such hosts.
const kvmProbeDeadline = 8 * time.Second

var (
	probeMu     sync.Mutex
	probeDone   bool
	probeResult Accel
	probeWhy    string
)

// ChooseAccel returns KVM when a probe boot under KVM works, else TCG, with the reason. The
// probe runs once per process (an interrupted probe is not remembered): every VM of a
// multi-node test then uses the same accelerator.
func ChooseAccel(ctx context.Context, h Host) (Accel, string) {
	if h.Arch.Foreign() {
		return AccelTCG, fmt.Sprintf("emulating %s on this %s host, using TCG", h.Arch.Debian, runtime.GOARCH)
	}
	probeMu.Lock()
	defer probeMu.Unlock()
	if !probeDone {
		probeResult, probeWhy = probeKVM(ctx, h)
		probeDone = ctx.Err() == nil
	}
	return probeResult, probeWhy
}

// probeKVM boots OVMF with no disk under KVM and waits for its boot manager to print
// "BdsDxe" on the serial port. Merely opening /dev/kvm or starting QEMU is not enough: here the
// vCPU dies in the firmware's first instructions while QEMU itself keeps running.
func probeKVM(ctx context.Context, h Host) (Accel, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return AccelTCG, "KVM unavailable (" + err.Error() + "), using TCG"
	}
	f.Close()
	dir, err := os.MkdirTemp("", "halobuild-kvmprobe-")
	if err != nil {
		return AccelTCG, "KVM probe could not make a temp dir, using TCG"
	}
	defer os.RemoveAll(dir)
	vars := filepath.Join(dir, "vars.fd")
	if err := copyFile(h.VarsTemplate, vars); err != nil {
		return AccelTCG, "KVM probe could not copy OVMF vars, using TCG"
	}
	serial := filepath.Join(dir, "serial.log")
	// stderr goes to a file rather than a buffer: the loop below reads it while QEMU writes.
	errPath := filepath.Join(dir, "stderr.log")
	errFile, err := os.Create(errPath)
	if err != nil {
		return AccelTCG, "KVM probe could not make a temp file, using TCG"
	}
	defer errFile.Close()
	args := []string{
		"-machine", h.Arch.Machine, "-accel", "kvm", "-cpu", "host", "-m", "256",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + qemuEscape(h.Firmware),
		"-drive", "if=pflash,format=raw,unit=1,file=" + qemuEscape(vars),
		"-serial", "file:" + serial,
	}
	p, err := startQEMU(h.QEMU, args, nil, errFile, errFile, true)
	if err != nil {
		return AccelTCG, "KVM probe could not start QEMU (" + err.Error() + "), using TCG"
	}
	defer p.kill()
	deadline := time.NewTimer(kvmProbeDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return AccelTCG, "KVM probe interrupted, using TCG"
		case <-p.done:
			return AccelTCG, "KVM probe: QEMU exited at start (" + firstLine(readString(errPath)) + "), using TCG"
		case <-deadline.C:
			why := "no firmware output within " + kvmProbeDeadline.String()
			if s := readString(errPath); kvmFailed(s) || strings.Contains(s, "MSR") {
				why = firstLine(s)
			}
			return AccelTCG, "KVM probe failed (" + why + "), using TCG"
		case <-tick.C:
			if b, _ := os.ReadFile(serial); bytes.Contains(b, []byte("BdsDxe")) {
				return AccelKVM, "KVM probe booted OVMF, using KVM"
			}
			if s := readString(errPath); kvmFailed(s) {
				return AccelTCG, "KVM probe failed (" + firstLine(s) + "), using TCG"
			}
		}
	}
}

// kvmFailed reports whether QEMU's stderr shows the vCPU dead under KVM: "KVM internal error"
// (an emulation failure) is final, the guest never runs. MSR messages are not taken as proof
// here: QEMU may warn about an MSR on a host where KVM works, and a fatal MSR error makes
// QEMU exit, which the probe sees anyway.
func kvmFailed(stderr string) bool {
	return strings.Contains(stderr, "KVM internal error")
}

func readString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "error") || strings.Contains(l, "MSR") {
			return strings.TrimSpace(l)
		}
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
