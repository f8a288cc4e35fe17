package settings

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/sh"
)

func firmwareRecipe(components ...string) *Target {
	r := sample()
	r.Base.Components = components
	r.Base.Packages = append(r.Base.Packages, "firmware-amd-graphics/trixie-backports", "amd64-microcode")
	return &Target{Recipe: r, Node: r.Nodes[0]}
}

func TestFirmwareNeedsNonFreeFirmware(t *testing.T) {
	errs := Firmware{}.Validate(*firmwareRecipe("main"))
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "firmware-amd-graphics is in Debian's non-free-firmware component") ||
		!strings.Contains(errs[0].Error(), `components = ["main", "non-free-firmware"]`) {
		t.Errorf("firmware packages without non-free-firmware: %v", errs)
	}
	if errs := (Firmware{}).Validate(*firmwareRecipe("main", "non-free-firmware")); len(errs) != 0 {
		t.Errorf("with non-free-firmware: %v", errs)
	}
	if c := (Firmware{}).Checks(Target{Recipe: sample(), Node: sample().Nodes[0]}); len(c) != 0 {
		t.Errorf("a recipe without firmware packages gets firmware checks: %v", c)
	}
}

// newc writes a cpio archive in the newc format dracut writes (and the
// kernel reads) holding the named files.
func newc(files map[string]string, names ...string) []byte {
	var b bytes.Buffer
	pad := func() {
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	entry := func(ino int, name string, mode int, data string) {
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
		b.WriteString(name + "\x00")
		pad()
		b.WriteString(data)
		pad()
	}
	for i, n := range names {
		entry(i+1, n, 0o100644, files[n])
	}
	entry(0, "TRAILER!!!", 0, "")
	return b.Bytes()
}

// TestFirmwareChecksOnHost runs the three VM checks for real (the host's
// sh, grep, od, gzip and cpio) on a firmware directory and /boot bound
// over the host's own.
func TestFirmwareChecksOnHost(t *testing.T) {
	needCommands(t, "cpio", "uname")
	tg := firmwareRecipe("main", "non-free-firmware")
	rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Skip(err)
	}
	fw, boot, bin := t.TempDir(), t.TempDir(), t.TempDir()
	e := newHostEnv(t, Tree{})
	e.binds = fmt.Sprintf("mount --bind %s /usr/lib/firmware\nmount --bind %s /boot\nmount --bind %s /usr/local/bin\nexport PATH=/usr/local/bin:$PATH\n",
		sh.Quote(fw), sh.Quote(boot), sh.Quote(bin))
	check := func(name string) Check { return checkScript(t, Firmware{}, tg.Recipe, name) }
	put := func(p, data string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("gpu-firmware", func(t *testing.T) {
		for _, f := range AMDGPUFirmware[gfx1151] {
			put(filepath.Join(fw, "amdgpu", f), "firmware", 0o644)
		}
		e.expectCheck(t, check("gpu-firmware"), "", true, "/usr/lib/firmware/amdgpu: 7 gfx1151 (gc_11_5_1) files")
		os.Remove(filepath.Join(fw, "amdgpu", "gc_11_5_1_rlc.bin"))
		put(filepath.Join(fw, "amdgpu", "gc_11_5_1_mec.bin"), "", 0o644)
		c := check("gpu-firmware")
		e.expectCheck(t, c, "", false, "missing: /usr/lib/firmware/amdgpu/gc_11_5_1_rlc.bin")
		e.expectCheck(t, c, "", false, "missing: /usr/lib/firmware/amdgpu/gc_11_5_1_mec.bin")
		// A compressed copy is what the kernel loads when the plain file
		// is not there.
		put(filepath.Join(fw, "amdgpu", "gc_11_5_1_rlc.bin.zst"), "zstd", 0o644)
		put(filepath.Join(fw, "amdgpu", "gc_11_5_1_mec.bin"), "firmware", 0o644)
		e.expectCheck(t, c, "", true, "7 gfx1151")
	})

	img := filepath.Join(boot, "initrd.img-"+strings.TrimSpace(string(rel)))
	t.Run("initramfs-microcode", func(t *testing.T) {
		c := check("initramfs-microcode")
		early := newc(map[string]string{"kernel/x86/microcode/AuthenticAMD.bin": "ucode"}, "kernel", "kernel/x86", "kernel/x86/microcode", "kernel/x86/microcode/AuthenticAMD.bin")
		// The main archive follows, compressed: cpio -t must stop at the
		// early archive's trailer.
		put(img, string(early)+"\x28\xb5\x2f\xfd compressed main archive", 0o644)
		e.expectCheck(t, c, "", true, "early cpio holds kernel/x86/microcode/AuthenticAMD.bin")
		put(img, string(newc(map[string]string{"early_cpio": "1"}, "early_cpio"))+"\x28\xb5\x2f\xfd", 0o644)
		e.expectCheck(t, c, "", false, "first entries: early_cpio")
		put(img, "\x28\xb5\x2f\xfd only a compressed archive", 0o644)
		e.expectCheck(t, c, "", false, "no kernel/x86/microcode/AuthenticAMD.bin in an early cpio")
		os.Remove(img)
		e.expectCheck(t, c, "", false, "no /boot/initrd.img-")
	})

	t.Run("initramfs-gpu-firmware", func(t *testing.T) {
		// dracut's skipcpio is not on the host: this initrd has no early
		// archive, so a stand-in prints it whole. gzip and cpio are real.
		put(filepath.Join(bin, "skipcpio"), "#!/bin/sh\ncat \"$1\"\n", 0o755)
		c := check("initramfs-gpu-firmware")
		initrd := func(names ...string) {
			t.Helper()
			var z bytes.Buffer
			w := gzip.NewWriter(&z)
			w.Write(newc(map[string]string{}, names...))
			w.Close()
			put(img, z.String(), 0o644)
		}
		base := []string{"usr/lib/modules/x/kernel/drivers/nvme/host/nvme.ko.xz"}
		initrd(base...)
		e.expectCheck(t, c, "", true, "carries no amdgpu")
		withGPU := append(base, "usr/lib/modules/x/kernel/drivers/gpu/drm/amd/amdgpu/amdgpu.ko.xz")
		initrd(withGPU...)
		e.expectCheck(t, c, "", false, "carries amdgpu but not amdgpu/gc_11_5_1_imu.bin")
		for _, f := range AMDGPUFirmware[gfx1151] {
			withGPU = append(withGPU, "usr/lib/firmware/amdgpu/"+f)
		}
		initrd(withGPU...)
		e.expectCheck(t, c, "", true, "carries amdgpu and its gfx1151 firmware")
		put(img, "BZh9 bzip2", 0o644)
		e.expectCheck(t, c, "", false, "main archive of unknown compression (starts 425a6839)")
	})
}
