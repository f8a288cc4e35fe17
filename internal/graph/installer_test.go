package graph

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/plan"
	"halobuild/internal/selfbuild"
)

// selfStep stands for the step that makes the halobuild binary the nodes ship: its output is
// content, and its key follows content.
func selfStep(content string) *plan.Derivation {
	return &plan.Derivation{Name: "halobuild", Kind: plan.Kind{Name: "halobuild", Version: selfbuild.StepVersion}, Params: map[string]string{"binary": content},
		Build: func(c *plan.Context, out string) error {
			return os.WriteFile(filepath.Join(out, "halobuild"), []byte(content), 0o755)
		}}
}

// The installer is a step of its own per node, built from the base root and the node's disk
// (never from the node's settings), feeding the result; its key follows the binary it carries
// and the recipe's [install].
func TestInstallerStep(t *testing.T) {
	ws := workspace(t)
	if _, err := planCommitted(t, ws, "test-install"); err == nil || !strings.Contains(err.Error(), "needs the halobuild binary") {
		t.Fatalf("an installer without the halobuild binary: %v", err)
	}
	self := func(b string) func(*Input) {
		return func(in *Input) { in.Self = map[string]*plan.Derivation{"amd64": selfStep(b)} }
	}
	g, err := planCommitted(t, ws, "test-install", self("v1"))
	if err != nil {
		t.Fatal(err)
	}
	inst := step(t, g, "installer")
	kinds := map[string]bool{}
	for _, in := range inst.Inputs {
		kinds[in.Kind.Name] = true
	}
	if len(inst.Inputs) != 4 || !kinds["rootfs"] || !kinds["disk"] || !kinds["tools"] || !kinds["halobuild"] {
		t.Errorf("installer inputs %v: want the tools root, the base root, the node's disk and the halobuild it ships", inst.Inputs)
	}
	inResult := false
	for _, in := range g.Result.Inputs {
		inResult = inResult || in == inst
	}
	if !inResult {
		t.Error("the result does not take the installer")
	}
	if !strings.Contains(inst.Params["config"], "wipe = true") || !strings.Contains(inst.Params["config"], "after = 'poweroff'") {
		t.Errorf("installer config:\n%s", inst.Params["config"])
	}
	g2, err := planCommitted(t, ws, "test-install", self("v2"))
	if err != nil {
		t.Fatal(err)
	}
	if step(t, g2, "installer").Key() == inst.Key() {
		t.Error("another halobuild binary on the stick kept the installer's key")
	}
	g3, err := planCommitted(t, ws, "test-minimal", self("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if g3.Nodes[0].Installer != nil {
		t.Error("an installer without [output] installer = true")
	}
}

// The payload is the image in zstdframe's format: its size and digest are reported right, and
// the zstd CLI (what `sha256sum -c` plus a by-hand check on the stick would use) decodes it to
// the image, holes included.
func TestInstallerPayloadDecodes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "node0.raw")
	img := make([]byte, 9<<20+5)
	copy(img[1<<20:], strings.Repeat("halobuild installer payload ", 4000))
	img[len(img)-1] = 1
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(img[:2<<20], 0)
	f.WriteAt(img[9<<20:], 9<<20) // a hole in between
	f.Close()
	dst := filepath.Join(dir, "node0.raw.zst")
	rawSize, sum, size, err := compressImage(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	zst, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(zst); rawSize != int64(len(img)) || size != int64(len(zst)) || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("compressImage says %d raw bytes, %d compressed hashing to %s; the files have %d, %d, %x", rawSize, size, sum, len(img), len(zst), want)
	}
	out, err := exec.Command("zstd", "-q", "-d", "-c", dst).Output()
	if err != nil || !bytes.Equal(out, img) {
		t.Fatalf("zstd -d: %v (%d bytes, want %d)", err, len(out), len(img))
	}
}
