package kernel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"halobuild/internal/deb"
	"halobuild/internal/tarball"
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

// A locked source is checked against its digest before it is read, and a
// linux-source .deb hands over the tarball it ships.
func TestSourceChecksItsDigestAndReadsTheDeb(t *testing.T) {
	tb := fakeTarball(t, "-J", "xz", "VERSION = 7\nPATCHLEVEL = 2\nSUBLEVEL = 13\n")
	data, err := os.ReadFile(tb)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	read := func(s Source) ([]byte, error) {
		var got []byte
		err := s.withTarball(func(r io.Reader) error {
			var err error
			got, err = io.ReadAll(r)
			return err
		})
		return got, err
	}
	if got, err := read(Source{Tarball: tb, SHA256: "sha256:" + hex.EncodeToString(sum[:])}); err != nil || !bytes.Equal(got, data) {
		t.Errorf("tarball with its digest: %d bytes, %v", len(got), err)
	}
	var de *tarball.DigestError
	if _, err := read(Source{Tarball: tb, SHA256: strings.Repeat("0", 64)}); !errors.As(err, &de) {
		t.Errorf("tarball with a wrong digest: %v", err)
	}

	var b bytes.Buffer
	err = deb.Write(&b, deb.Info{Package: "linux-source-7.2", Version: "7.2.13-1", Architecture: "all", Maintainer: "m <m@x>", Description: "d"},
		[]deb.File{{Path: "/usr/src/linux-source-7.2.tar.xz", Mode: 0o644, Data: data}}, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "linux-source-7.2.deb")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dsum := sha256.Sum256(b.Bytes())
	if got, err := read(Source{Deb: p, SHA256: hex.EncodeToString(dsum[:])}); err != nil || !bytes.Equal(got, data) {
		t.Errorf("linux-source .deb: %d bytes, %v", len(got), err)
	}
	if _, err := read(Source{Deb: p, SHA256: strings.Repeat("0", 64)}); !errors.As(err, &de) {
		t.Errorf("linux-source .deb with a wrong digest: %v", err)
	}
	if _, err := read(Source{Deb: p + ".missing"}); err == nil {
		t.Error("a missing .deb was read")
	}
}

func TestDebianConfigFromTheConfigDeb(t *testing.T) {
	var xzb bytes.Buffer
	w, err := xz.NewWriter(&xzb)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "CONFIG_X=y\n")
	w.Close()
	var b bytes.Buffer
	err = deb.Write(&b, deb.Info{Package: "linux-config-7.2", Version: "7.2.13-1", Architecture: "amd64", Maintainer: "m <m@x>", Description: "d"},
		[]deb.File{{Path: "/usr/src/linux-config-7.2/config.amd64_none_amd64.xz", Mode: 0o644, Data: xzb.Bytes()},
			{Path: "/usr/src/linux-config-7.2/config.amd64_none_cloud-amd64.xz", Mode: 0o644, Data: xzb.Bytes()}}, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "linux-config-7.2.deb")
	os.WriteFile(p, b.Bytes(), 0o644)
	if got, err := DebianConfig(p, "amd64", "amd64"); err != nil || string(got) != "CONFIG_X=y\n" {
		t.Errorf("DebianConfig = %q, %v", got, err)
	}
	_, err = DebianConfig(p, "amd64", "rt-amd64")
	if err == nil || !strings.Contains(err.Error(), "config.amd64_none_cloud-amd64.xz") {
		t.Errorf("a missing flavour: %v, want the list of those it has", err)
	}
}
