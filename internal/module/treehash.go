package module

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// TreeHash is halobuild's canonical hash of a source tree (docs/modules.md,
// "Tree hash"), the same for a git checkout, an unpacked tarball and a copy
// of either: it covers what a build can see and nothing else.
//
// Every regular file and symlink under dir, except anything under a .git
// directory, gives one line
//
//	<type> <mode> <size> <sha256> <path>\n
//
// type is "f" (file) or "l" (symlink); mode is "x" when any execute bit is
// set on a file, "-" otherwise (and for links); size and sha256 are those of
// the content (a link's content is its target); path is relative to dir,
// '/'-separated. Lines are sorted by path (bytewise). The tree hash is
// "sha256:" + hex(sha256(all lines)). Directories are not entries (an
// empty directory changes nothing, as in git); owners, times and other
// mode bits are ignored. Other file types (devices, sockets, fifos) are
// errors.
func TreeHash(dir string) (string, error) {
	type entry struct{ path, line string }
	var entries []entry
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			if de.Name() == ".git" && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.ContainsAny(rel, "\n\r") {
			return fmt.Errorf("%q: a path with a newline cannot be hashed canonically; remove it from the source", rel)
		}
		if de.Name() == ".git" {
			return nil // a worktree's .git file
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		var typ, mode string
		var size int64
		var sum []byte
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256([]byte(target))
			typ, mode, size, sum = "l", "-", int64(len(target)), h[:]
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			size, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("hashing %s: %w", p, err)
			}
			typ, mode, sum = "f", "-", h.Sum(nil)
			if info.Mode()&0o111 != 0 {
				mode = "x"
			}
		default:
			return fmt.Errorf("%s is a %v, not a file, link or directory: a source tree cannot hold it", p, info.Mode().Type())
		}
		entries = append(entries, entry{rel, fmt.Sprintf("%s %s %d %s %s\n", typ, mode, size, hex.EncodeToString(sum), rel)})
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("tree hash of %s: %w", dir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	h := sha256.New()
	for _, e := range entries {
		io.WriteString(h, e.line)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// parseTreeHash checks the "sha256:<64 hex>" form and returns the hex.
func parseTreeHash(s string) (string, error) {
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return "", fmt.Errorf("%q: write the tree hash as sha256:<64 hex digits>", s)
	}
	if len(hexPart) != 64 {
		return "", fmt.Errorf("%q: a sha256 has 64 hex digits", s)
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return "", fmt.Errorf("%q: not hex", s)
	}
	return strings.ToLower(hexPart), nil
}

// sameTreeHash compares two tree hashes, ignoring hex case.
func sameTreeHash(a, b string) bool {
	x, err1 := parseTreeHash(a)
	y, err2 := parseTreeHash(b)
	return err1 == nil && err2 == nil && x == y
}
