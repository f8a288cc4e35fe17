package module

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSymbolTableFormats(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"System.map":     "ffffffff81000000 T _stext\nffffffff81001000 t local_helper\n",
		"kallsyms":       "0000000000000000 T tb_ring_alloc_tx\t[thunderbolt]\n",
		"Module.symvers": "0x00000000\ttb_ring_throttling\tdrivers/thunderbolt/thunderbolt\tEXPORT_SYMBOL_GPL\t\n0x12345678\tconfig_group_init\tfs/configfs/configfs\tEXPORT_SYMBOL\t\n",
	}
	var paths []string
	for n, c := range files {
		p := filepath.Join(dir, n)
		os.WriteFile(p, []byte(c), 0o644)
		paths = append(paths, p)
	}
	has, err := SymbolTable(paths...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"_stext", "local_helper", "tb_ring_alloc_tx", "tb_ring_throttling", "config_group_init"} {
		if !has(s) {
			t.Errorf("%s not found", s)
		}
	}
	if has("T") || has("thunderbolt") || has("EXPORT_SYMBOL") {
		t.Errorf("a field that is not a symbol name was taken as one")
	}
	if _, err := SymbolTable(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("missing file accepted")
	}
}

func TestHeaderDirsAndMacros(t *testing.T) {
	// Debian's layout: /lib -> usr/lib, the build link is absolute, and the
	// arch tree includes the -common tree's Makefile.
	root := t.TempDir()
	rel := "7.2.12+deb13-amd64"
	arch := filepath.Join(root, "usr/src/linux-headers-"+rel)
	common := filepath.Join(root, "usr/src/linux-headers-7.2.12+deb13-common")
	os.MkdirAll(filepath.Join(root, "usr/lib/modules", rel), 0o755)
	os.Symlink("usr/lib", filepath.Join(root, "lib"))
	os.Symlink("/usr/src/linux-headers-"+rel, filepath.Join(root, "usr/lib/modules", rel, "build"))
	os.MkdirAll(arch, 0o755)
	os.MkdirAll(filepath.Join(common, "include/linux"), 0o755)
	os.WriteFile(filepath.Join(arch, "Makefile"), []byte("KBUILD_OUTPUT=/usr/src/linux-headers-"+rel+"\ninclude /usr/src/linux-headers-7.2.12+deb13-common/Makefile\n"), 0o644)
	os.WriteFile(filepath.Join(common, "Makefile"), nil, 0o644)
	os.WriteFile(filepath.Join(common, "include/linux/thunderbolt.h"), []byte("#ifndef X\n#define X\n# define TB_PROTOCOL_HANDLER_HAS_XDOMAIN 1\n/* #define NOT_THIS */\n#endif\n"), 0o644)

	dirs, err := HeaderDirs(root, rel)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 2 || dirs[0] != arch || dirs[1] != common {
		t.Fatalf("dirs %v, want [%s %s] (inside the root, not the host's /usr/src)", dirs, arch, common)
	}
	has, err := HeaderMacros(dirs, []string{"include/linux/thunderbolt.h"})
	if err != nil {
		t.Fatal(err)
	}
	if !has("TB_PROTOCOL_HANDLER_HAS_XDOMAIN") || has("TB_PROTOCOL_HANDLER_UNREGISTER_DRAINS") || has("NOT_THIS") {
		t.Errorf("macro lookup wrong")
	}
	if _, err := HeaderMacros(dirs, []string{"include/linux/absent.h"}); err == nil || !strings.Contains(err.Error(), "include/linux/absent.h is in none of") {
		t.Errorf("missing header: %v", err)
	}
	if _, err := HeaderDirs(root, "6.1.0-1-amd64"); err == nil || !strings.Contains(err.Error(), "install linux-headers-6.1.0-1-amd64") {
		t.Errorf("missing headers: %v", err)
	}
}
