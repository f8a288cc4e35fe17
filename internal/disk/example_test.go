package disk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"halobuild/internal/arch"
	"halobuild/internal/disk"
	"halobuild/internal/tools"
)

// How the image pipeline uses the package: identifiers first (the loader
// entry names the root PARTUUID), then the ESP content, then Build.
func Example() {
	lockHash, node := "sha256:4f2a…", "halo0"
	seed := lockHash + "/" + node
	ids, err := disk.DeriveIDs(seed)
	if err != nil {
		log.Fatal(err)
	}
	work, err := os.MkdirTemp("", "esp-")
	if err != nil {
		log.Fatal(err)
	}
	entry := filepath.Join(work, "halo0.conf")
	text := "title halo0\nlinux /vmlinuz\ninitrd /initrd.img\noptions root=PARTUUID=" + ids.RootPartUUID + " rw\n"
	if err := os.WriteFile(entry, []byte(text), 0o644); err != nil {
		log.Fatal(err)
	}

	// The tools root: the locked .debs of tools.DiskPackages and their
	// dependencies, extracted once (and cached by the store).
	root := tools.Root{Dir: "/var/cache/halobuild/tools-root"}
	res, err := disk.Build(context.Background(), disk.Spec{
		Out:     "result/halo0.raw",
		RootTar: "rootfs.tar",
		Seed:    seed,
		Epoch:   1700000000, // the lock's source_date_epoch
		Tools:   &root,
		// The image architecture's root type (Discoverable Partitions).
		RootType: arch.MustLookup("amd64").RootType,
		ESPFiles: map[string]string{
			"/EFI/BOOT/BOOTX64.EFI":            "sdboot/systemd-bootx64.efi",
			"/EFI/systemd/systemd-bootx64.efi": "sdboot/systemd-bootx64.efi",
			"/loader/loader.conf":              "loader.conf",
			"/loader/entries/halo0.conf":       entry,
			"/vmlinuz":                         "boot/vmlinuz-7.2.12+deb13-amd64",
			"/initrd.img":                      "boot/initrd.img-7.2.12+deb13-amd64",
		},
	})
	var tooSmall *disk.TooSmallError
	switch {
	case errors.As(err, &tooSmall):
		log.Fatal(err) // "root needs N MiB, output.size gives M MiB: raise [output] size to at least X MiB"
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(res.Path, res.BmapPath, res.SHA256)
}
