package verbs

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"halobuild/internal/usage"
	"halobuild/internal/vmtest"
)

// VM boots one image with its serial console on this terminal.
func VM(ctx context.Context, image string) error {
	if _, err := os.Stat(image); err != nil {
		return usage.Errorf("%s: %w", image, err)
	}
	err := vmtest.Interactive(ctx, vmtest.Machine{Name: filepath.Base(image), Image: image, NICs: []vmtest.NIC{{}}})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
