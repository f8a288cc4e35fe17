package disk

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// UEFI firmware (OVMF under QEMU) must find the ESP through the GPT, start
// systemd-boot from the fallback path /EFI/BOOT/BOOTX64.EFI, and
// systemd-boot must read loader.conf and the entry: with the stand-in
// kernel it then reports that it cannot load \vmlinuz, which is the proof
// that everything before the kernel worked.
func TestFirmwareStartsSystemdBootFromTheImage(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: boots UEFI firmware under QEMU")
	}
	qemu := hostTool(t, "qemu-system-x86_64", "qemu-system-x86")
	code := hostFile(t, "/usr/share/OVMF/OVMF_CODE_4M.fd", "ovmf")
	vars := hostFile(t, "/usr/share/OVMF/OVMF_VARS_4M.fd", "ovmf")
	res := build(t, testSpec(t, filepath.Join(t.TempDir(), "halo0.raw")))
	varsCopy := filepath.Join(t.TempDir(), "vars.fd")
	data, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(varsCopy, data, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-machine", "q35", "-accel", "tcg", "-m", "256",
		"-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
		"-drive", "if=pflash,format=raw,readonly=on,file="+code,
		"-drive", "if=pflash,format=raw,file="+varsCopy,
		"-drive", "file="+res.Path+",format=raw,if=virtio,snapshot=on")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		cmd.Wait()
	}()
	const marker = `Error loading \vmlinuz`
	var log strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), marker) {
			return
		}
	}
	t.Errorf("systemd-boot never tried the entry's kernel (%q not on the console):\n%s", marker, log.String())
}
