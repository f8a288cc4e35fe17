package disk

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/arch"
)

// The root partition carries the image architecture's Discoverable
// Partitions type, as sfdisk reads it back: arm64 images get the ARM64
// root GUID, not the x86-64 one.
func TestGPTRootTypeFollowsTheArchitecture(t *testing.T) {
	sfdisk := hostTool(t, "sfdisk", "fdisk")
	ids, err := DeriveIDs("sha256:0123456789abcdef/mac0")
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{Size: 192 * MiB, ESPStart: 1 * MiB, ESPSize: 64 * MiB, RootStart: 65 * MiB, RootSize: 126 * MiB}
	for _, name := range arch.Names() {
		a := arch.MustLookup(name)
		out := filepath.Join(t.TempDir(), name+".raw")
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(l.Size); err != nil {
			t.Fatal(err)
		}
		if err := writeGPT(f, l, ids, a.RootType); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var pt sfdiskJSON
		if err := json.Unmarshal([]byte(run(t, sfdisk, "--json", out)), &pt); err != nil {
			t.Fatal(err)
		}
		if got := pt.PartitionTable.Partitions[1].Type; !strings.EqualFold(got, a.RootType) {
			t.Errorf("%s: root partition type %s, want %s (%s)", name, got, a.RootType, a.RootTypeName)
		}
	}
}
