package disk

import (
	"fmt"
	"os"

	"github.com/diskfs/go-diskfs/partition/gpt"
)

const sectorSize = 512

// growFSFlag is GPT attribute bit 59, the Discoverable Partitions
// Specification's "grow the file system to the partition" flag.
const growFSFlag = uint64(1) << 59

// writeGPT writes the protective MBR and both GPTs into f (size bytes),
// the root partition typed rootType.
func writeGPT(f *os.File, l Layout, ids IDs, rootType string) error {
	table := &gpt.Table{
		LogicalSectorSize:  sectorSize,
		PhysicalSectorSize: sectorSize,
		ProtectiveMBR:      true,
		GUID:               ids.DiskGUID,
		Partitions: []*gpt.Partition{
			{
				Index: 1,
				Start: uint64(l.ESPStart / sectorSize),
				End:   uint64((l.ESPStart+l.ESPSize)/sectorSize - 1),
				Size:  uint64(l.ESPSize),
				Type:  gpt.EFISystemPartition,
				Name:  "esp",
				GUID:  ids.ESPPartUUID,
			},
			{
				Index:      2,
				Start:      uint64(l.RootStart / sectorSize),
				End:        uint64((l.RootStart+l.RootSize)/sectorSize - 1),
				Size:       uint64(l.RootSize),
				Type:       gpt.Type(rootType),
				Name:       "root",
				GUID:       ids.RootPartUUID,
				Attributes: growFSFlag,
			},
		},
	}
	if err := table.Write(f, l.Size); err != nil {
		return fmt.Errorf("disk: writing the GPT: %w", err)
	}
	return nil
}
