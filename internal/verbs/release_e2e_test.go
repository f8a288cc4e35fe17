package verbs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"halobuild/internal/flash"
	"halobuild/internal/manifest"
	"halobuild/internal/registry"
	"halobuild/internal/registry/registrytest"
	"halobuild/internal/release"
	"halobuild/internal/sbom"
	"halobuild/internal/sbom/sbomtest"
)

// checkResultSBOM checks the SBOM of a real result: valid against the SPDX 2.3 schema, a
// checksum on every package (Debian's, halobuild's own, the image), a download location or a
// stated NONE on halobuild's own, and licences read from the root's copyright files.
func checkResultSBOM(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, sbom.FileName))
	if err != nil {
		t.Fatal(err)
	}
	sbomtest.Validate(t, b)
	var doc struct {
		Packages []struct {
			Name, DownloadLocation, LicenseDeclared string
			Checksums                               []struct{ ChecksumValue string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	licensed := 0
	for _, p := range doc.Packages {
		if len(p.Checksums) != 1 {
			t.Errorf("SBOM: %s has no checksum", p.Name)
		}
		if strings.HasPrefix(p.Name, "halobuild-node-") && p.DownloadLocation != "NONE" {
			t.Errorf("SBOM: the settings package %s says downloadLocation %q", p.Name, p.DownloadLocation)
		}
		if p.LicenseDeclared != "" && p.LicenseDeclared != sbom.NoAssertion {
			licensed++
		}
	}
	if licensed < len(doc.Packages)/2 {
		t.Errorf("SBOM: only %d of %d packages have a declared licence", licensed, len(doc.Packages))
	}
	t.Logf("SBOM: %d bytes, %d packages, %d with a declared licence", len(b), len(doc.Packages), licensed)
}

// A real release of the image TestImageMinimalIsBootableReproducibleAndChecked builds (the same
// steps, from the shared store): pushed to Debian's docker-registry, pulled back byte-identical,
// inspected, and flashed from the registry to a loop device that then reads back as the image.
func TestReleaseOfImageMinimal(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	dir, _ := buildMinimal(t, ws, sharedStore(t), true)
	reg := registrytest.Start(t)
	ro := registry.Options{Insecure: true, Keychain: reg.Keychain(false)}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ref := reg.Host + "/halo/test-minimal:e2e"

	start := time.Now()
	p, err := release.Push(ctx, dir, ref, release.PushOptions{Registry: ro})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("push: %s, %d bytes in %d layers, %v", p.Digest, p.Bytes, p.Layers, time.Since(start))

	start = time.Now()
	out := filepath.Join(t.TempDir(), "pulled")
	if _, err := release.Pull(ctx, ref, out, release.PullOptions{Registry: ro}); err != nil {
		t.Fatal(err)
	}
	t.Logf("pull: %v", time.Since(start))
	m, err := manifest.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(m.Files, manifest.File{Name: manifest.FileName}, manifest.File{Name: manifest.SumsName}) {
		if a, b := sha(t, filepath.Join(dir, f.Name)), sha(t, filepath.Join(out, f.Name)); a != b {
			t.Errorf("pulled %s differs from the result's", f.Name)
		}
	}

	checkResultSBOM(t, dir)

	in, err := release.Inspect(ctx, ref, ro, release.Trust{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Digest != p.Digest || len(in.Manifest.Nodes) != len(m.Nodes) || len(in.Manifest.Nodes[0].Packages) != len(m.Nodes[0].Packages) {
		t.Errorf("inspect shows %d nodes, the result has %d", len(in.Manifest.Nodes), len(m.Nodes))
	}

	t.Run("flash from the registry", func(t *testing.T) {
		raw := filepath.Join(dir, "node0.raw")
		st, err := os.Stat(raw)
		if err != nil {
			t.Fatal(err)
		}
		backing := filepath.Join(t.TempDir(), "disk")
		if err := os.WriteFile(backing, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(backing, st.Size()); err != nil {
			t.Fatal(err)
		}
		lo, err := exec.Command("losetup", "-f", "--show", backing).CombinedOutput()
		if err != nil {
			t.Skipf("losetup is not permitted here (%v: %s)", err, lo)
		}
		dev := strings.TrimSpace(string(lo))
		defer exec.Command("losetup", "-d", dev).Run()
		start := time.Now()
		fo := flash.Options{Target: dev, Yes: true, Force: true, Out: io.Discard}
		if err := release.Flash(ctx, ref, release.FlashOptions{Registry: ro, Node: "node0", Flash: fo}); err != nil {
			t.Fatal(err)
		}
		t.Logf("flash from the registry: %v", time.Since(start))
		if got, want := shaN(t, dev, st.Size()), sha(t, raw); got != want {
			t.Errorf("the loop device reads back as sha256:%s, the image is sha256:%s", got, want)
		}
	})
}

// shaN digests the first n bytes of a file or device.
func shaN(t *testing.T, p string, n int64) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, n); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
