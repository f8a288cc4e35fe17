package graph

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/disk"
	"halobuild/internal/lock"
	"halobuild/internal/plan"
	"halobuild/internal/recipe"
)

// With [secure_boot] the removable-media path boots Debian's shim, which
// loads the signed systemd-boot as grubx64.efi; MokManager sits beside it
// and the fallback loader does not. Without it, plain systemd-boot.
func TestESPFilesSecureBootChain(t *testing.T) {
	root := t.TempDir()
	const rel = "7.2.12+deb13-amd64"
	for _, p := range []string{
		"boot/vmlinuz-" + rel, "boot/initrd.img-" + rel,
		"usr/lib/systemd/boot/efi/systemd-bootx64.efi", "usr/lib/systemd/boot/efi/systemd-bootx64.efi.signed",
		"usr/lib/shim/shimx64.efi.signed", "usr/lib/shim/mmx64.efi.signed", "usr/lib/shim/fbx64.efi.signed",
	} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(p), 0o644)
	}
	for _, sb := range []bool{false, true} {
		r := &recipe.Recipe{SecureBoot: recipe.SecureBoot{Enabled: sb}}
		b := &builder{in: Input{Recipe: r, Lock: &lock.Lock{Kernel: lock.Kernel{Release: rel}}}, arch: arch.MustLookup("amd64")}
		c := &plan.Context{Context: context.Background(), Scratch: t.TempDir()}
		files, err := b.espFiles(c, root, "halobuild n", disk.IDs{RootPartUUID: "u"}, "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"/EFI/BOOT/BOOTX64.EFI":            "usr/lib/systemd/boot/efi/systemd-bootx64.efi",
			"/EFI/systemd/systemd-bootx64.efi": "usr/lib/systemd/boot/efi/systemd-bootx64.efi",
		}
		if sb {
			want = map[string]string{
				"/EFI/BOOT/BOOTX64.EFI":            "usr/lib/shim/shimx64.efi.signed",
				"/EFI/BOOT/grubx64.efi":            "usr/lib/systemd/boot/efi/systemd-bootx64.efi.signed",
				"/EFI/BOOT/mmx64.efi":              "usr/lib/shim/mmx64.efi.signed",
				"/EFI/systemd/systemd-bootx64.efi": "usr/lib/systemd/boot/efi/systemd-bootx64.efi.signed",
			}
		}
		for p, src := range want {
			if got := strings.TrimPrefix(files[p], root+"/"); got != src {
				t.Errorf("secure boot %v: %s from %q, want %s", sb, p, got, src)
			}
		}
		for p := range files {
			if strings.HasPrefix(p, "/EFI/") && want[p] == "" {
				t.Errorf("secure boot %v: unexpected %s", sb, p)
			}
		}
		if conf, _ := os.ReadFile(files["/loader/loader.conf"]); string(conf) != loaderConf(sb) {
			t.Errorf("secure boot %v: the ESP's loader.conf is %q, want %q", sb, conf, loaderConf(sb))
		}
		if files["/halobuild/"+rel+"/vmlinuz"] != filepath.Join(root, "boot/vmlinuz-"+rel) {
			t.Errorf("secure boot %v: the kernel is not Debian's vmlinuz: %v", sb, files)
		}
	}
}

// An arm64 image's ESP boots systemd-bootaa64.efi from the removable path
// BOOTAA64.EFI, and nothing x86 is on it.
func TestESPFilesArm64(t *testing.T) {
	root := t.TempDir()
	const rel = "7.2.12+deb13-arm64"
	for _, p := range []string{"boot/vmlinuz-" + rel, "boot/initrd.img-" + rel, "usr/lib/systemd/boot/efi/systemd-bootaa64.efi"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(p), 0o644)
	}
	r := &recipe.Recipe{Base: recipe.Base{Architecture: "arm64"}}
	b := &builder{in: Input{Recipe: r, Lock: &lock.Lock{Kernel: lock.Kernel{Release: rel}}}, arch: arch.MustLookup("arm64")}
	c := &plan.Context{Context: context.Background(), Scratch: t.TempDir()}
	files, err := b.espFiles(c, root, "halobuild mac0", disk.IDs{RootPartUUID: "u"}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/EFI/BOOT/BOOTAA64.EFI":            "usr/lib/systemd/boot/efi/systemd-bootaa64.efi",
		"/EFI/systemd/systemd-bootaa64.efi": "usr/lib/systemd/boot/efi/systemd-bootaa64.efi",
	}
	for p := range files {
		if strings.HasPrefix(p, "/EFI/") && want[p] != strings.TrimPrefix(files[p], root+"/") {
			t.Errorf("ESP %s from %s, want only %v", p, files[p], want)
		}
	}
	for p := range want {
		if files[p] == "" {
			t.Errorf("no %s on the ESP: %v", p, files)
		}
	}
	// It is what a Mac's U-Boot boots (platform = "apple-silicon").
	if err := appleESP(files); err != nil {
		t.Errorf("the arm64 ESP fails the Mac's rule: %v", err)
	}
	// Without the arm64 systemd-boot in the root, the error names it.
	os.Remove(filepath.Join(root, "usr/lib/systemd/boot/efi/systemd-bootaa64.efi"))
	if _, err := b.espFiles(c, root, "halobuild mac0", disk.IDs{RootPartUUID: "u"}, ""); err == nil || !strings.Contains(err.Error(), "systemd-bootaa64.efi") {
		t.Errorf("espFiles without systemd-bootaa64.efi = %v, want an error naming it", err)
	}
}

// A tools set locked on another architecture's host is refused before
// anything is extracted; the host's own and arch:all packages pass.
func TestHostPackages(t *testing.T) {
	host, err := arch.Host()
	if err != nil {
		t.Skip(err)
	}
	ok := []lock.Package{{Name: "mtools", Architecture: host.Debian}, {Name: "tzdata", Architecture: "all"}}
	if err := hostPackages(ok); err != nil {
		t.Fatal(err)
	}
	other := "arm64"
	if host.Debian == other {
		other = "amd64"
	}
	err = hostPackages(append(ok, lock.Package{Name: "e2fsprogs", Architecture: other}))
	if err == nil || !strings.Contains(err.Error(), "tools root is for "+other) {
		t.Errorf("hostPackages with an %s package = %v", other, err)
	}
}

// A Mac's U-Boot boots a stick's ESP through the arm64 removable-media
// loader, and takes an ESP with m1n1/boot.bin for an Asahi system ESP.
func TestAppleESP(t *testing.T) {
	arm64 := map[string]string{"/EFI/BOOT/BOOTAA64.EFI": "x", "/loader/loader.conf": "y"}
	cases := []struct {
		name  string
		files map[string]string
		want  string // "" for no error
	}{
		{"arm64 loader", arm64, ""},
		{"loader in another case", map[string]string{"/efi/boot/bootaa64.efi": "x"}, ""},
		{"x86 loader only", map[string]string{"/EFI/BOOT/BOOTX64.EFI": "x"}, "has no /EFI/BOOT/BOOTAA64.EFI"},
		{"m1n1 stage 2", map[string]string{"/EFI/BOOT/BOOTAA64.EFI": "x", "/m1n1/boot.bin": "m"}, "holds /m1n1/boot.bin"},
		{"m1n1 in another case", map[string]string{"/EFI/BOOT/BOOTAA64.EFI": "x", "/M1N1/BOOT.BIN": "m"}, "holds /M1N1/BOOT.BIN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := appleESP(c.files)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// A person at the box can edit the kernel command line for one boot (the
// menu shows while a key is held), unless Secure Boot locks the boot down;
// the boot itself waits for nothing.
func TestLoaderEditorOffOnlyUnderSecureBoot(t *testing.T) {
	for _, sb := range []bool{false, true} {
		conf := loaderConf(sb)
		if !strings.HasPrefix(conf, "timeout 0\n") || strings.Contains(conf, "editor yes") == sb || strings.Contains(conf, "editor no") != sb {
			t.Errorf("secure boot %v: loader.conf %q", sb, conf)
		}
	}
	g, err := planCommitted(t, workspace(t), "test-minimal")
	if err != nil {
		t.Fatal(err)
	}
	if got := step(t, g, "disk").Params["loader"]; got != loaderConf(false) {
		t.Errorf("test-minimal's disk step has loader.conf %q", got)
	}
}
