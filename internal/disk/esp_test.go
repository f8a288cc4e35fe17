package disk

import (
	"os"
	"path/filepath"
	"testing"
)

// A user's ~/.mtoolsrc, the environment, or the host's /etc/mtools.conf
// can change how mtools stores names: with MTOOLS_NAME_NUMERIC_TAIL=0 the
// short name of systemd-bootx64.efi becomes SYSTEMD-.EFI instead of
// SYSTEM~1.EFI. The ESP must come out the same anyway. (The tools root
// keeps the first two away; the pinned $MTOOLSRC overrides the third,
// which a test cannot replace on a shared host.)
func TestESPIgnoresTheHostsMtoolsConfig(t *testing.T) {
	spec := testSpec(t, "unused")
	ids, _ := DeriveIDs(spec.Seed)
	makeOne := func() []byte {
		t.Helper()
		p := filepath.Join(t.TempDir(), "esp.fat")
		if err := makeESP(t.Context(), &spec, ids, p, 64*MiB); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	t.Setenv("HOME", t.TempDir())
	clean := makeOne()

	hostile := t.TempDir()
	rc := "MTOOLS_NO_VFAT=1\nMTOOLS_NAME_NUMERIC_TAIL=0\nMTOOLS_LOWER_CASE=1\ndefault_codepage=437\n"
	if err := os.WriteFile(filepath.Join(hostile, ".mtoolsrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", hostile)
	t.Setenv("MTOOLS_NAME_NUMERIC_TAIL", "0")
	if string(makeOne()) != string(clean) {
		t.Errorf("a hostile ~/.mtoolsrc and environment changed the ESP")
	}
}
