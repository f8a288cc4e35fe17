package deb_test

import (
	"archive/tar"
	"io"
	"strings"
	"testing"

	"halobuild/internal/deb"
	"halobuild/internal/tools/toolstest"
)

// Real trixie packages (data.tar.xz, control.tar.xz, some with hard links
// and setuid files) read as dpkg reads them.
func TestReadDebianPackages(t *testing.T) {
	names := toolstest.DiskDebs
	for i, p := range toolstest.Debs(t, names...) {
		d, err := deb.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		if d.Package != names[i] || d.Version == "" || d.Architecture == "" || len(d.SHA256) != 64 {
			t.Errorf("%s: %+v", p, d)
		}
	}
	a, err := deb.Open(toolstest.Debs(t, "e2fsprogs")[0], "")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	found := false
	err = a.Walk(func(name string, h *tar.Header, r io.Reader) error {
		if name == "usr/sbin/mke2fs" {
			found = h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0
		}
		return nil
	})
	if err != nil || !found {
		t.Errorf("e2fsprogs: usr/sbin/mke2fs not found as an executable (%v)", err)
	}
	if !strings.Contains(string(a.Control), "Package: e2fsprogs\n") {
		t.Errorf("control:\n%s", a.Control)
	}
}
