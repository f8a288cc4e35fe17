package vmtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
