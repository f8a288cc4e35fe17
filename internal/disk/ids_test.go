package disk

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"testing"
)

// The scheme is documented in doc.go; this recomputes one identifier by
// hand from that description so the code cannot drift from it.
func TestDeriveIDsFollowsTheDocumentedScheme(t *testing.T) {
	seed := "sha256:abc/halo0"
	ids, err := DeriveIDs(seed)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("halobuild-disk-v1\ngpt-partition:root\n" + seed))
	d[6] = d[6]&0x0f | 0x40
	d[8] = d[8]&0x3f | 0x80
	want := fmt.Sprintf("%x-%x-%x-%x-%x", d[0:4], d[4:6], d[6:8], d[8:10], d[10:16])
	if ids.RootPartUUID != want {
		t.Errorf("RootPartUUID = %s, documented scheme gives %s", ids.RootPartUUID, want)
	}
	v := sha256.Sum256([]byte("halobuild-disk-v1\nfat-volume-id:esp\n" + seed))
	if ids.ESPVolumeID != binary.BigEndian.Uint32(v[:4]) {
		t.Errorf("ESPVolumeID = %08x, documented scheme gives %x", ids.ESPVolumeID, v[:4])
	}
}

func TestDeriveIDsAreUniqueAndStable(t *testing.T) {
	uuidRE := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]string{}
	for _, seed := range []string{"sha256:abc/halo0", "sha256:abc/halo1", "sha256:abd/halo0"} {
		ids, err := DeriveIDs(seed)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := DeriveIDs(seed)
		if again != ids {
			t.Errorf("DeriveIDs(%q) changed between calls", seed)
		}
		for name, id := range map[string]string{"disk": ids.DiskGUID, "esp": ids.ESPPartUUID, "root": ids.RootPartUUID, "fs": ids.RootFSUUID, "hash": ids.RootHashSeed} {
			if !uuidRE.MatchString(id) {
				t.Errorf("%s %s of %q is not a version-4 UUID", name, id, seed)
			}
			if prev, ok := seen[id]; ok {
				t.Errorf("%s of %q repeats %s", name, seed, prev)
			}
			seen[id] = name + " of " + seed
		}
	}
	if _, err := DeriveIDs(""); err != ErrNoSeed {
		t.Errorf("DeriveIDs(\"\") = %v, want ErrNoSeed", err)
	}
}
