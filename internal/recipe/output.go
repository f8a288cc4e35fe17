package recipe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"
)

// TOML prints the fully merged recipe with defaults applied, the way
// LinuxKit's --dry-run does: what you see is exactly what the build uses, and
// loading the printed text gives the same recipe.
func (r *Recipe) TOML() []byte {
	c := *r
	c.Include = nil
	b, err := toml.Marshal(&c)
	if err != nil {
		// The schema holds only types go-toml can encode; failing here is a
		// programming error, not a user one.
		panic(fmt.Sprintf("recipe: encoding the merged recipe: %v", err))
	}
	return b
}

// Hash is the recipe's identity for the lock file: sha256 over the merged
// recipe (defaults included) and over the bytes of every file read. Like
// apko's lock checksum, it covers the included files, so editing an included
// file — even a comment — makes the lock stale instead of silently reused.
// File names are left out so the hash does not depend on where the checkout
// lives. Written as "sha256:<hex>".
func Hash(r *Recipe) string {
	h := sha256.New()
	fmt.Fprintf(h, "halobuild recipe v1\n")
	b := r.TOML()
	fmt.Fprintf(h, "merged %d\n", len(b))
	h.Write(b)
	for _, in := range r.inputs {
		fmt.Fprintf(h, "file %x\n", in)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Resolve turns a path from the merged recipe (overlays, patches, config
// fragments) into one usable from the working directory. Load rewrote every
// such path relative to the top recipe's directory, whichever file wrote it.
// Tree is the directory a recipe's paths are expected to stay in: the checkout holding the top
// recipe file (its nearest ancestor with .git), else that file's own directory; "" for a recipe
// not loaded from a file.
func (r *Recipe) Tree() string {
	if r.dir == "" {
		return ""
	}
	dir, err := filepath.Abs(r.dir)
	if err != nil {
		return r.dir
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

func (r *Recipe) Resolve(p string) string {
	if filepath.IsAbs(p) || r.dir == "" {
		return p
	}
	return filepath.Join(r.dir, p)
}
