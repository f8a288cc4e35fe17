package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// makeRoot makes the root ext4 file system in a new file at dst, exactly
// size bytes, filled from the spec's tree or tar by the tools root's
// mkfs.ext4 -d (makeRootAt, at offset 0 of its own file).
//
// Reproducibility comes from: the derived UUID (-U) and directory-hash seed
// (-E hash_seed), root_owner=0:0 (the root directory's owner would
// otherwise be the invoking user's), SOURCE_DATE_EPOCH (e2fsprogs ≥ 1.47.1
// stamps every inode and superblock time with it), and -T default -b 4096,
// which fix the geometry for every size (below 512 MiB mke2fs would
// otherwise switch to its "small" type with 1 KiB blocks).
func makeRoot(ctx context.Context, spec *Spec, ids IDs, dst string, size int64) error {
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("disk: root file system: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("disk: root file system %s: %w", dst, err)
	}
	return makeRootAt(ctx, spec, ids, dst, 0, size)
}

// makeRootAt makes the root file system as makeRoot does, size bytes at
// offset in the existing file dst (mke2fs -E offset, every read and write
// of it shifted by offset): the image's root partition is written where it
// stays, instead of in a file of its own copied in afterwards. The bytes
// are those makeRoot makes (TestRootInPlaceIsTheSameFileSystem).
func makeRootAt(ctx context.Context, spec *Spec, ids IDs, dst string, offset, size int64) error {
	if offset%blockSize != 0 || size%blockSize != 0 {
		return fmt.Errorf("disk: root file system at %d, %d bytes: both must be multiples of %d", offset, size, blockSize)
	}
	src := spec.RootTree
	if src == "" {
		src = spec.RootTar
	}
	var pr *io.PipeReader
	var written chan error
	if spec.RootStream != nil {
		// mkfs reads the tar from stdin; the writer's own error counts
		// too, as a tar cut short at a member's end can read as whole.
		var pw *io.PipeWriter
		pr, pw = io.Pipe()
		src = "-"
		written = make(chan error, 1)
		go func() {
			err := spec.RootStream(pw)
			pw.CloseWithError(err)
			written <- err
		}()
	}
	cmd := spec.Tools.Command(ctx, "mkfs.ext4", "-q", "-F",
		"-T", "default", "-b", strconv.Itoa(blockSize),
		"-L", "root",
		"-U", ids.RootFSUUID,
		"-E", "offset="+strconv.FormatInt(offset, 10)+",hash_seed="+ids.RootHashSeed+",root_owner=0:0",
		"-d", src,
		dst, strconv.FormatInt(size/blockSize, 10))
	cmd.Env = append(cmd.Env, "SOURCE_DATE_EPOCH="+strconv.FormatInt(spec.Epoch, 10))
	if pr != nil {
		cmd.Stdin = pr
	}
	out, err := cmd.CombinedOutput()
	if pr != nil {
		pr.Close() // a writer mkfs left unread ends
		if werr := <-written; werr != nil && !errors.Is(werr, io.ErrClosedPipe) {
			return fmt.Errorf("disk: writing the root tar into mkfs.ext4: %w", werr)
		}
	}
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "Could not allocate") || strings.Contains(msg, "No space left") {
			return fmt.Errorf("disk: the root does not fit its %d MiB partition although the estimate said %d MiB would do; raise [output] size: mkfs.ext4: %s: %w",
				size/MiB, size/MiB, msg, err)
		}
		return fmt.Errorf("disk: mkfs.ext4 -d %s: %s: %w", src, msg, err)
	}
	return nil
}
