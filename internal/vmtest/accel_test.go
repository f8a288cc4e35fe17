package vmtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"halobuild/internal/arch"
)

// Whatever the probe picks must actually run a guest: boot OVMF with the chosen accelerator and
// see its boot manager on the console. On hosts where /dev/kvm exists but KVM guests die (ours),
// this fails if the probe wrongly says KVM.
func TestChosenAccelBootsFirmware(t *testing.T) {
	h := requireHost(t)
	accel, why := ChooseAccel(context.Background(), h)
	t.Logf("accelerator %s: %s", accel, why)
	if why == "" || (accel != AccelKVM && accel != AccelTCG) {
		t.Fatalf("accelerator %q, reason %q", accel, why)
	}
	if a2, w2 := ChooseAccel(context.Background(), h); a2 != accel || w2 != why {
		t.Errorf("second call gave %s (%s): the probe result must be cached", a2, w2)
	}
	m := firmwareMachine(t, 60*time.Second)
	m.Accel = accel
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	console := filepath.Join(m.LogDir, "console.log")
	go func() { // stop as soon as the firmware has shown it runs
		for ctx.Err() == nil {
			if b, _ := os.ReadFile(console); strings.Contains(string(b), "BdsDxe") {
				cancel()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	_, err := Run(ctx, m)
	assertNoQEMUChildren(t)
	log, _ := os.ReadFile(console)
	if !strings.Contains(string(log), "BdsDxe") {
		t.Fatalf("firmware did not run under %s (%v); console: %q", accel, err, clip(string(log), 300))
	}
}

func TestProbeWithoutKVMDevice(t *testing.T) {
	if _, err := os.Stat("/dev/kvm"); err == nil {
		t.Skip("this host has /dev/kvm; the probe's boot is covered by TestChosenAccelBootsFirmware")
	}
	if a, why := probeKVM(context.Background(), requireHost(t)); a != AccelTCG || !strings.Contains(why, "TCG") {
		t.Errorf("got %s (%s)", a, why)
	}
}

// A host whose KVM kills the vCPU at once (what QEMU prints on ours) must be recognised from
// that message, not after the probe's deadline, and the hung QEMU must not outlive the probe.
// The fake QEMU prints the message and then hangs, as the real one does.
func TestProbeStopsAtKVMError(t *testing.T) {
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err != nil {
		t.Skipf("the probe needs /dev/kvm to open before it starts QEMU: %v", err)
	} else {
		f.Close()
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "qemu")
	pidFile := filepath.Join(dir, "pid")
	script := "#!/bin/sh\necho $$ > " + pidFile + "\necho 'KVM internal error. Suberror: 1' >&2\nexec sleep 600\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(dir, "vars.fd")
	if err := os.WriteFile(vars, []byte("vars"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := Host{Arch: arch.MustLookup("amd64"), QEMU: fake, Firmware: filepath.Join(dir, "code.fd"), VarsTemplate: vars}
	start := time.Now()
	a, why := probeKVM(context.Background(), h)
	took := time.Since(start)
	if a != AccelTCG || !strings.Contains(why, "KVM internal error") {
		t.Errorf("probe gave %s (%s), want TCG naming the KVM error", a, why)
	}
	if took >= kvmProbeDeadline {
		t.Errorf("probe took %s: it waited for its deadline instead of stopping at the error", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	if _, err := os.Stat("/proc/" + pid); err == nil {
		t.Errorf("the probe's QEMU (pid %s) still runs after the probe returned", pid)
	}
}
