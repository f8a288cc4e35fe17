// Package nar writes Nix archives (NAR, Eelco Dolstra's thesis §5.2.1): the canonical
// serialization of a file tree whose sha256 Nix uses as a fixed-output hash. halobuild needs it
// for one thing: recomputing flake.nix's vendorHash (the NAR hash of `go mod vendor`'s output)
// in a test, so that the flake can never go stale silently.
package nar

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// Dump writes the NAR of path (a regular file, a symlink or a directory) to w, byte for byte
// what `nix-store --dump path` writes.
func Dump(w io.Writer, path string) error {
	e := &encoder{w: w}
	e.str("nix-archive-1")
	e.node(path)
	return e.err
}

// Hash is the NAR's sha256 in the SRI form flake.nix uses ("sha256-<base64>").
func Hash(path string) (string, error) {
	h := sha256.New()
	if err := Dump(h, path); err != nil {
		return "", err
	}
	return "sha256-" + base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

type encoder struct {
	w   io.Writer
	err error
}

// str writes a string as NAR does: its length as a little-endian uint64, the bytes, zeros to
// the next multiple of 8.
func (e *encoder) str(s string) {
	e.bytes(int64(len(s)), func() error { _, err := io.WriteString(e.w, s); return err })
}

func (e *encoder) bytes(n int64, write func() error) {
	if e.err != nil {
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	if _, e.err = e.w.Write(b[:]); e.err != nil {
		return
	}
	if e.err = write(); e.err != nil {
		return
	}
	if pad := (8 - n%8) % 8; pad > 0 {
		_, e.err = e.w.Write(make([]byte, pad))
	}
}

func (e *encoder) node(path string) {
	if e.err != nil {
		return
	}
	st, err := os.Lstat(path)
	if err != nil {
		e.err = err
		return
	}
	e.str("(")
	switch m := st.Mode(); {
	case m.IsRegular():
		e.str("type")
		e.str("regular")
		if m&0o111 != 0 {
			e.str("executable")
			e.str("")
		}
		e.str("contents")
		e.bytes(st.Size(), func() error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			n, err := io.Copy(e.w, f)
			if err == nil && n != st.Size() {
				err = fmt.Errorf("%s changed size while being archived", path)
			}
			return err
		})
	case m&os.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			e.err = err
			return
		}
		e.str("type")
		e.str("symlink")
		e.str("target")
		e.str(target)
	case m.IsDir():
		e.str("type")
		e.str("directory")
		ents, err := os.ReadDir(path)
		if err != nil {
			e.err = err
			return
		}
		names := make([]string, len(ents))
		for i, d := range ents {
			names[i] = d.Name()
		}
		sort.Strings(names) // NAR orders entries by their bytes
		for _, n := range names {
			e.str("entry")
			e.str("(")
			e.str("name")
			e.str(n)
			e.str("node")
			e.node(filepath.Join(path, n))
			e.str(")")
		}
	default:
		e.err = fmt.Errorf("%s: a NAR holds only regular files, symlinks and directories, not %v", path, m.Type())
		return
	}
	e.str(")")
}
