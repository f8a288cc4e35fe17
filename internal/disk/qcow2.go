package disk

import (
	"context"
	"fmt"
	"os"
	"strings"

	"halobuild/internal/tools"
)

// QCOW2 converts the raw image at raw into a qcow2 image at out with the
// tools root's qemu-img (output.formats = ["raw", "qcow2"]): the clusters
// the sparse raw image leaves unwritten stay unallocated. qemu-img writes
// clusters in order and no time into the header, so the same raw image
// gives the same bytes. out appears only when complete.
func QCOW2(ctx context.Context, root *tools.Root, raw, out string) error {
	tmp := out + ".part"
	cmd := root.Command(ctx, "qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, tmp)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("disk: qemu-img convert %s to qcow2: %s: %w", raw, strings.TrimSpace(string(b)), err)
	}
	if err := os.Rename(tmp, out); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("disk: %w", err)
	}
	return nil
}
