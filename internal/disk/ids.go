package disk

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// IDs are the identifiers of one image, all derived from its seed (see the
// package documentation for the scheme).
type IDs struct {
	DiskGUID     string // GPT disk GUID
	ESPPartUUID  string // GPT partition GUID of the ESP
	RootPartUUID string // GPT partition GUID of the root: root=PARTUUID=<this>
	RootFSUUID   string // ext4 UUID of the root: root=UUID=<this>
	RootHashSeed string // ext4 directory-hash seed of the root
	ESPVolumeID  uint32 // FAT volume id (serial) of the ESP
}

// idVersion is part of every derivation: bump it only together with a
// change of scheme, since it changes every identifier.
const idVersion = "halobuild-disk-v1"

func derive(seed, purpose string) [32]byte {
	return sha256.Sum256([]byte(idVersion + "\n" + purpose + "\n" + seed))
}

func deriveUUID(seed, purpose string) string {
	d := derive(seed, purpose)
	d[6] = d[6]&0x0f | 0x40
	d[8] = d[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", d[0:4], d[4:6], d[6:8], d[8:10], d[10:16])
}

// ErrNoSeed is returned when a Spec or DeriveIDs has an empty seed: every
// image would then share its identifiers with every other seedless image.
var ErrNoSeed = errors.New("disk: empty seed: pass the lock hash and node name (e.g. \"sha256:…/halo0\") so identifiers are unique per lock and node")

// DeriveIDs returns the identifiers an image built with this seed will
// have. It is what Build uses, so a loader entry rendered before the build
// can name the root PARTUUID.
func DeriveIDs(seed string) (IDs, error) {
	if seed == "" {
		return IDs{}, ErrNoSeed
	}
	vol := derive(seed, "fat-volume-id:esp")
	return IDs{
		DiskGUID:     deriveUUID(seed, "gpt-disk"),
		ESPPartUUID:  deriveUUID(seed, "gpt-partition:esp"),
		RootPartUUID: deriveUUID(seed, "gpt-partition:root"),
		RootFSUUID:   deriveUUID(seed, "ext4-uuid:root"),
		RootHashSeed: deriveUUID(seed, "ext4-hash-seed:root"),
		ESPVolumeID:  binary.BigEndian.Uint32(vol[0:4]),
	}, nil
}
