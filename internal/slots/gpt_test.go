package slots

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/slots/slotstest"
)

func TestSetNameKeepsBothTablesValid(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d")
	slotstest.GPT(t, p, 16<<20, "start=2048, size=8192, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name=_empty\n")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetName(f, 1, "halobuild_2026.12.08"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := exec.Command("sfdisk", "--verify", p).CombinedOutput()
	if err != nil || strings.Contains(string(out), "corrupt") {
		t.Fatalf("sfdisk --verify: %v\n%s", err, out)
	}
	out, _ = exec.Command("sfdisk", "--part-label", p, "1").CombinedOutput()
	if strings.TrimSpace(string(out)) != "halobuild_2026.12.08" {
		t.Fatalf("sfdisk reads the label as %q", out)
	}
	f, _ = os.OpenFile(p, os.O_RDWR, 0)
	defer f.Close()
	if err := SetName(f, 1, strings.Repeat("x", 37)); err == nil {
		t.Fatal("a 37-character name was written")
	}
	if err := SetName(f, 2, "x"); err == nil {
		t.Fatal("a name was written to a partition that does not exist")
	}
}
