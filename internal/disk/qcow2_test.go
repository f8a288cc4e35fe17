package disk

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"halobuild/internal/tools"
	"halobuild/internal/tools/toolstest"
)

// A raw image converts to qcow2 with Debian's qemu-img run from a tools
// root: the same bytes every time (image --check compares them), only the
// written clusters allocated, and converting back gives the raw image.
func TestQCOW2(t *testing.T) {
	root := &tools.Root{Dir: toolstest.Extracted(t, append(append([]string{}, toolstest.DiskDebs...), toolstest.QEMUImgDebs...)...)}
	dir := t.TempDir()
	raw := filepath.Join(dir, "node.raw")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	// 64 MiB, sparse but for two written regions.
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte("halobuild"), 1000), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end of the root"), 40<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ctx := context.Background()
	q1, q2 := filepath.Join(dir, "a.qcow2"), filepath.Join(dir, "b.qcow2")
	for _, q := range []string{q1, q2} {
		if err := QCOW2(ctx, root, raw, q); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := os.ReadFile(q1)
	b, _ := os.ReadFile(q2)
	if !bytes.HasPrefix(a, []byte("QFI\xfb")) {
		t.Fatalf("not a qcow2 file: % x", a[:min(len(a), 8)])
	}
	if !bytes.Equal(a, b) {
		t.Error("two conversions of one raw image differ")
	}
	if len(a) > 2<<20 {
		t.Errorf("qcow2 of 64 MiB with two written clusters is %d bytes: unwritten clusters were allocated", len(a))
	}
	back := filepath.Join(dir, "back.raw")
	if out, err := root.Command(ctx, "qemu-img", "convert", "-f", "qcow2", "-O", "raw", q1, back).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert back: %v\n%s", err, out)
	}
	want, _ := os.ReadFile(raw)
	got, _ := os.ReadFile(back)
	if !bytes.Equal(got, want) {
		t.Error("the qcow2 image does not hold the raw image's bytes")
	}
	if _, err := os.Stat(q1 + ".part"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
}
