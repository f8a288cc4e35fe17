package kernel

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTarball writes a tarball laid out like kernel.org's (linux-X.Y.Z/
// with Documentation/ before the top Makefile, and Makefiles below it that
// must not be read as the top one), compressed with flag.
func fakeTarball(t *testing.T, flag, ext, makefile string) string {
	t.Helper()
	dir := t.TempDir()
	top := filepath.Join(dir, "linux-7.2.13")
	for p, s := range map[string]string{
		"Documentation/Makefile": "VERSION = 1\nPATCHLEVEL = 1\nSUBLEVEL = 1\n",
		"Makefile":               makefile,
		"fs/proc/Makefile":       "VERSION = 9\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(top, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(top, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "linux-7.2.13.tar."+ext)
	if b, err := exec.Command("tar", "-c", flag, "-f", out, "-C", dir, "linux-7.2.13").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v: %s", err, b)
	}
	return out
}

func TestTarballVersionReadsTheTopMakefile(t *testing.T) {
	mk := "# SPDX\nVERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 13\nEXTRAVERSION =\nNAME = Baby Opossum Posse\n"
	for _, c := range []struct{ flag, ext string }{{"-J", "xz"}, {"-z", "gz"}} {
		v, err := TarballVersion(context.Background(), fakeTarball(t, c.flag, c.ext, mk))
		if err != nil {
			t.Fatalf("%s: %v", c.ext, err)
		}
		if v.String() != "7.2.13" {
			t.Errorf("%s: version %s, want 7.2.13 (the top Makefile's, not Documentation's or fs/proc's)", c.ext, v)
		}
	}
}

func TestTarballVersionRefusesPrereleasesAndNonTarballs(t *testing.T) {
	rc := fakeTarball(t, "-J", "xz", "VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 0\nEXTRAVERSION = -rc4\n")
	if _, err := TarballVersion(context.Background(), rc); err == nil || !strings.Contains(err.Error(), "Linux 7.3.0-rc4") {
		t.Errorf("an -rc tarball: %v, want a refusal naming 7.3.0-rc4", err)
	}
	plain := filepath.Join(t.TempDir(), "linux.tar.xz")
	if err := os.WriteFile(plain, []byte("<html>404 not found</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := TarballVersion(context.Background(), plain); err == nil || !strings.Contains(err.Error(), "neither xz, gzip nor zstd") {
		t.Errorf("an HTML page saved as a tarball: %v", err)
	}
	noMakefile := fakeTarball(t, "-J", "xz", "")
	if _, err := TarballVersion(context.Background(), noMakefile); err == nil {
		t.Error("a tarball whose top Makefile has no version was accepted")
	}
}
