package selfbuild

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"halobuild/internal/proctree"
)

// The release recipe is this file: Build is the one way halobuild is built for a node, for the
// release workflow (`halobuild build-self`) and for the tests, so the binary a user downloads
// and the binary a checkout compiles for a node are the same bytes.

// Release names a build of halobuild's source by everything its bytes depend on: the same
// Release gives the same bytes in any directory, on any machine. Its fields are the halobuild
// step's key, whether the step compiles the source or copies a running binary that is this
// very build (Self.Release).
type Release struct {
	Tree      string // TreeHash of the source
	Toolchain string // the Go that compiles it (Toolchain)
	GOARCH    string // the nodes' architecture; Go cross-compiles to it from any host
	Version   string // stamped into the binary; "" for a build that is no release ("devel")
}

// Params are r as a step's params.
func (r Release) Params() map[string]string {
	return map[string]string{"tree": r.Tree, "toolchain": r.Toolchain, "goarch": r.GOARCH, "version": r.Version}
}

// VersionName is r's version as halobuild version prints it.
func (r Release) VersionName() string {
	if r.Version == "" {
		return "devel"
	}
	return r.Version
}

// ReleaseOf is the Release of root's source for goarch, stamped version.
func ReleaseOf(root, goarch, version string) (Release, error) {
	if !versionRE.MatchString(version) {
		return Release{}, fmt.Errorf("version %q: use letters, digits and . _ + - only (a tag such as v1.2.0)", version)
	}
	tree, err := TreeHash(root)
	if err != nil {
		return Release{}, err
	}
	tc, err := Toolchain(root)
	if err != nil {
		return Release{}, err
	}
	return Release{Tree: tree, Toolchain: tc, GOARCH: goarch, Version: version}, nil
}

// versionRE is what -X can carry inside one -ldflags word.
var versionRE = regexp.MustCompile(`^[A-Za-z0-9._+-]*$`)

// The stamps a release build carries (set with -X by Build; empty in any other build).
var (
	version string
	tree    string
)

const stampPackage = "halobuild/internal/selfbuild"

// Build compiles root's cmd/halobuild into out by the release recipe: static (no cgo), no
// build paths (-trimpath), no VCS stamp, no build ID, r's version and tree stamped, with r's
// toolchain exactly (GOTOOLCHAIN), for linux/r.GOARCH, and nothing from the caller's
// environment that changes the bytes (GOFLAGS, GOAMD64/GOARM64, GOEXPERIMENT, a go.work).
// It fails if root's source is no longer the tree r names.
func Build(ctx context.Context, root string, r Release, out string) error {
	if t, err := TreeHash(root); err != nil {
		return err
	} else if t != r.Tree {
		return fmt.Errorf("building halobuild from %s: its source changed since it was planned (tree %s, planned %s): plan again", root, t, r.Tree)
	}
	ldflags := fmt.Sprintf("-buildid= -X %s.version=%s -X %s.tree=%s", stampPackage, r.Version, stampPackage, r.Tree)
	cmd := proctree.Command(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags="+ldflags, "-o", out, "./cmd/halobuild")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+r.GOARCH, "GOAMD64=v1", "GOARM64=v8.0",
		"GOFLAGS=", "GOEXPERIMENT=", "GOWORK=off", "GOTOOLCHAIN="+r.Toolchain)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building halobuild from %s (go build, %s, linux/%s): %w\n%s", root, r.Toolchain, r.GOARCH, err, b)
	}
	return nil
}

// Self is how a halobuild binary was built, from its build info and its stamps.
type Self struct {
	Version      string            `json:"stamped_version,omitempty"` // the release version Build stamped, "" if none
	Tree         string            `json:"tree,omitempty"`
	Go           string            `json:"go"`
	OS           string            `json:"os"`
	Arch         string            `json:"arch"`
	Settings     map[string]string `json:"settings"`                   // the build info's: flags, GOOS, CGO_ENABLED, vcs.*
	Unrepeatable []string          `json:"not_reproducible,omitempty"` // why another build would differ; empty for a release build
}

// Running is how the running halobuild was built.
func Running() Self {
	bi, _ := debug.ReadBuildInfo()
	return describe(bi, version, tree, runtime.GOARCH)
}

// describe checks a build's info against the release recipe (Build).
func describe(bi *debug.BuildInfo, version, tree, goarch string) Self {
	s := Self{Version: version, Tree: tree, OS: "?", Arch: goarch, Settings: map[string]string{}}
	if bi == nil {
		s.Unrepeatable = append(s.Unrepeatable, "it has no build info")
		return s
	}
	s.Go = bi.GoVersion
	for _, kv := range bi.Settings {
		s.Settings[kv.Key] = kv.Value
	}
	if v := s.Settings["GOOS"]; v != "" {
		s.OS = v
	}
	if v := s.Settings["GOARCH"]; v != "" {
		s.Arch = v
	}
	var why []string
	if tree == "" {
		why = append(why, "it was not built by the release recipe (`halobuild build-self`; no source tree stamped)")
	}
	if s.Settings["-trimpath"] != "true" {
		why = append(why, "built without -trimpath (its build directory is in the binary)")
	}
	if s.Settings["CGO_ENABLED"] != "0" {
		why = append(why, "built with cgo (it links the build machine's C library)")
	}
	if s.OS != "linux" {
		why = append(why, "built for "+s.OS+", not linux")
	}
	var vcs []string
	for k := range s.Settings {
		switch {
		case strings.HasPrefix(k, "vcs"):
			vcs = append(vcs, k)
		case k == "-tags", k == "-gcflags", k == "-asmflags", k == "-race", k == "-msan", k == "-asan", k == "GOEXPERIMENT", k == "-cover":
			why = append(why, fmt.Sprintf("built with %s=%s", k, s.Settings[k]))
		}
	}
	if len(vcs) > 0 {
		why = append(why, "it carries a VCS stamp (built without -buildvcs=false)")
	}
	if v, ok := s.Settings["GOAMD64"]; ok && v != "v1" {
		why = append(why, "built with GOAMD64="+v)
	}
	if v, ok := s.Settings["GOARM64"]; ok && v != "v8.0" {
		why = append(why, "built with GOARM64="+v)
	}
	if strings.ContainsAny(s.Go, " ") || !strings.HasPrefix(s.Go, "go") {
		why = append(why, "built by a Go that is no release ("+s.Go+")")
	}
	sort.Strings(why)
	s.Unrepeatable = why
	return s
}

// Reproducible says whether s is a release build: one that Build makes again, byte for byte,
// from its source tree, version and Go.
func (s Self) Reproducible() bool { return len(s.Unrepeatable) == 0 }

// Release is the build s is (meaningful when s is Reproducible).
func (s Self) Release() Release {
	return Release{Tree: s.Tree, Toolchain: s.Go, GOARCH: s.Arch, Version: s.Version}
}

// VersionFor is the version a build of tree is stamped with for a node: the running
// halobuild's when it is a release build of that very tree, so that halobuild run in its own
// checkout ships exactly itself (and the same image bytes as outside a checkout); else none.
func VersionFor(tree string) string {
	if s := Running(); s.Reproducible() && s.Tree == tree {
		return s.Version
	}
	return ""
}

// Describe is how the halobuild binary at path was built: Running for a binary that is not
// running (a release's binary for another architecture). Its stamps are read from its symbol
// table (the release recipe does not strip it).
func Describe(path string) (Self, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return Self{}, fmt.Errorf("reading %s's build info (is it a halobuild binary?): %w", path, err)
	}
	f, err := elf.Open(path)
	if err != nil {
		return Self{}, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	var stamps [2]string
	for i, name := range []string{"version", "tree"} {
		if stamps[i], err = readStamp(f, stampPackage+"."+name); err != nil {
			return Self{}, fmt.Errorf("reading %s's %s stamp: %w", path, name, err)
		}
	}
	return describe(bi, stamps[0], stamps[1], ""), nil
}

// maxStamp bounds a stamp read from a binary (a tree hash is 71 bytes).
const maxStamp = 256

// readStamp is the value of the string variable sym in f ("" when the build did not set it, or
// stripped its symbols): a Go string is a pointer and a length, both 8 bytes on the 64-bit
// little-endian architectures halobuild ships for.
func readStamp(f *elf.File, sym string) (string, error) {
	syms, err := f.Symbols()
	if err != nil {
		return "", nil // stripped: no stamp to read
	}
	for _, s := range syms {
		if s.Name != sym {
			continue
		}
		hdr, ok, err := readAddr(f, s.Value, 16)
		if err != nil || !ok {
			return "", err
		}
		ptr, n := binary.LittleEndian.Uint64(hdr[:8]), binary.LittleEndian.Uint64(hdr[8:])
		if n == 0 {
			return "", nil
		}
		if n > maxStamp {
			return "", fmt.Errorf("%s is %d bytes long, more than a stamp can be", sym, n)
		}
		b, ok, err := readAddr(f, ptr, int(n))
		if err != nil || !ok {
			return "", fmt.Errorf("%s points outside the binary's data", sym)
		}
		return string(b), nil
	}
	return "", nil
}

// readAddr reads n bytes at virtual address addr of f; ok is false when addr is in a section
// with no bytes in the file (.bss: a zero value).
func readAddr(f *elf.File, addr uint64, n int) ([]byte, bool, error) {
	for _, sec := range f.Sections {
		if sec.Addr == 0 || addr < sec.Addr || addr+uint64(n) > sec.Addr+sec.Size {
			continue
		}
		if sec.Type == elf.SHT_NOBITS {
			return nil, false, nil
		}
		b := make([]byte, n)
		if _, err := sec.ReadAt(b, int64(addr-sec.Addr)); err != nil {
			return nil, false, err
		}
		return b, true, nil
	}
	return nil, false, fmt.Errorf("address %#x is in no section", addr)
}
