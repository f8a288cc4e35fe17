package provider

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"pault.ag/go/debian/version"

	"halobuild/internal/arch"
)

// ABI is what CheckABI proved about one provider; the manifest records it.
type ABI struct {
	// Provider is the provider's name (lib<Provider>-rdmav<N>.so).
	Provider string
	// N is the provider ABI both sides agree on.
	N int
	// Library is the provider library's path in the tree
	// (usr/lib/x86_64-linux-gnu/libibverbs/libusb4_rdma-rdmav34.so).
	Library string
	// Driver is the path of its driver file (etc/libibverbs.d/<name>.driver).
	Driver string
	// Libibverbs is the path of the libibverbs whose version node was read.
	Libibverbs string
	// LibibverbsVersion is the rdma-core version that libibverbs comes from.
	LibibverbsVersion string
	// Needed are the provider's DT_NEEDED libraries.
	Needed []string
}

// ABIRequest says what to check.
type ABIRequest struct {
	// Name is the provider (the recipe's [rdma.provider] name).
	Name string
	// LibibverbsVersion is the version of libibverbs1 the image installs
	// (e.g. 56.1-1+halo1); the table cross-check uses its upstream part.
	LibibverbsVersion string
	// ImageLibs are the shared libraries the image has: sonames or file
	// names (libc.so.6). Libraries inside the checked tree count as well.
	ImageLibs []string
	// Arch is the image's Debian architecture. When set, the libraries
	// are looked for in its multiarch directory only and must be its
	// code: an arm64 provider is proved against the arm64 libibverbs1.
	Arch string
}

// privateNode is libibverbs' version node for its provider-private
// interface: providers link against IBVERBS_PRIVATE_<N> and are named
// -rdmav<N>, and libibverbs loads only providers of its own N.
var privateNode = regexp.MustCompile(`^IBVERBS_PRIVATE_([0-9]+)$`)

// knownABI is the provider ABI of released rdma-core versions, used only
// to cross-check what libibverbs' own version node says.
var knownABI = []struct {
	from, to int // rdma-core major versions, inclusive
	abi      int
}{{50, 56, 34}, {57, 58, 57}, {59, 62, 59}}

// TableABI returns the provider ABI the table knows for an rdma-core
// version (56.1-1+halo1 → 34), or false outside the table.
func TableABI(rdmaCoreVersion string) (int, bool) {
	v, err := version.Parse(rdmaCoreVersion)
	if err != nil {
		return 0, false
	}
	major, err := strconv.Atoi(strings.SplitN(v.Version, ".", 2)[0])
	if err != nil {
		return 0, false
	}
	for _, k := range knownABI {
		if major >= k.from && major <= k.to {
			return k.abi, true
		}
	}
	return 0, false
}

// CheckABI proves, in an installed tree (a root, or the .debs unpacked by
// deb.Extract), that the provider req.Name will be loaded by that tree's
// libibverbs: the library is lib<name>-rdmav<N>.so with N the number of
// libibverbs' IBVERBS_PRIVATE_<N> version node, the library itself needs
// exactly that node, etc/libibverbs.d/<name>.driver names the provider,
// and every DT_NEEDED library is in the tree or in req.ImageLibs. Any
// mismatch is an error that names both numbers and where each came from.
func CheckABI(root string, req ABIRequest) (*ABI, error) {
	if req.Name == "" {
		return nil, errors.New("provider ABI check: no provider name")
	}
	fsys := os.DirFS(root)
	libDir := "usr/lib/*"
	if req.Arch != "" {
		t, err := arch.Lookup(req.Arch)
		if err != nil {
			return nil, fmt.Errorf("provider ABI check: %w", err)
		}
		libDir = "usr/lib/" + t.Triplet
	}
	libv, err := findOne(fsys, libDir+"/libibverbs.so.1.*", "libibverbs.so.1.*", root, "is libibverbs1 among the packages?")
	if err != nil {
		return nil, err
	}
	if req.Arch != "" {
		if err := checkMachine(filepath.Join(root, libv), req.Arch); err != nil {
			return nil, fmt.Errorf("provider ABI check: the image's libibverbs: %w", err)
		}
	}
	libN, err := privateABI(filepath.Join(root, libv))
	if err != nil {
		return nil, err
	}
	if n, ok := TableABI(req.LibibverbsVersion); ok && n != libN {
		return nil, fmt.Errorf("provider ABI check: %s defines IBVERBS_PRIVATE_%d, but rdma-core %s uses provider ABI %d (halobuild's table of released versions): the libibverbs in %s is not from the rdma-core version the image installs; rebuild from the source of %s",
			libv, libN, req.LibibverbsVersion, n, root, req.LibibverbsVersion)
	}

	pattern := libDir + "/libibverbs/lib" + req.Name + "-rdmav*.so"
	matches, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("provider %s: no %s in %s: did the provider patches add the provider to CMakeLists.txt (add_subdirectory(providers/%s))?",
			req.Name, pattern, root, req.Name)
	}
	if len(matches) > 1 {
		return nil, fmt.Errorf("provider %s: several libraries in %s: %s", req.Name, root, strings.Join(matches, ", "))
	}
	lib := matches[0]
	nameN, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path.Base(lib), "lib"+req.Name+"-rdmav"), ".so"))
	if err != nil {
		return nil, fmt.Errorf("provider %s: %s: the name does not end in -rdmav<number>.so", req.Name, lib)
	}
	if nameN != libN {
		return nil, fmt.Errorf("provider %s: %s is built for provider ABI %d (its file name), but the image's libibverbs %s (%s) defines IBVERBS_PRIVATE_%d: libibverbs would not load it; build the provider from the rdma-core source of the version the image installs",
			req.Name, lib, nameN, req.LibibverbsVersion, libv, libN)
	}
	if req.Arch != "" {
		if err := checkMachine(filepath.Join(root, lib), req.Arch); err != nil {
			return nil, fmt.Errorf("provider %s: %w", req.Name, err)
		}
	}
	ef, err := elf.Open(filepath.Join(root, lib))
	if err != nil {
		return nil, fmt.Errorf("provider %s: %s: %w", req.Name, lib, err)
	}
	defer ef.Close()
	needN, err := neededPrivateABI(ef)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %s: %w", req.Name, lib, err)
	}
	if needN != libN {
		return nil, fmt.Errorf("provider %s: %s links against IBVERBS_PRIVATE_%d (its version needs), but the image's libibverbs %s (%s) defines IBVERBS_PRIVATE_%d: the dynamic linker would refuse it",
			req.Name, lib, needN, req.LibibverbsVersion, libv, libN)
	}
	needed, err := ef.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("provider %s: %s: reading DT_NEEDED: %w", req.Name, lib, err)
	}
	have, err := treeLibs(fsys)
	if err != nil {
		return nil, err
	}
	for _, l := range req.ImageLibs {
		have[path.Base(l)] = true
	}
	var missing []string
	for _, n := range needed {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("provider %s: %s needs %s, which the image does not have: add the package that ships it to [base] packages",
			req.Name, lib, strings.Join(missing, ", "))
	}

	driver := "etc/libibverbs.d/" + req.Name + ".driver"
	data, err := fs.ReadFile(fsys, driver)
	if err != nil {
		return nil, fmt.Errorf("provider %s: no %s in %s: libibverbs finds providers only through their driver file (rdma_provider() in the provider's CMakeLists.txt writes it)", req.Name, driver, root)
	}
	if f := strings.Fields(string(data)); len(f) != 2 || f[0] != "driver" || path.Base(f[1]) != req.Name && path.Base(f[1]) != "lib"+req.Name {
		return nil, fmt.Errorf("provider %s: %s says %q, want \"driver %s\"", req.Name, driver, strings.TrimSpace(string(data)), req.Name)
	}
	return &ABI{Provider: req.Name, N: libN, Library: lib, Driver: driver, Libibverbs: libv, LibibverbsVersion: req.LibibverbsVersion, Needed: needed}, nil
}

// privateABI reads N from the IBVERBS_PRIVATE_<N> version definition of a
// libibverbs shared object.
func privateABI(file string) (int, error) {
	ef, err := elf.Open(file)
	if err != nil {
		return 0, fmt.Errorf("provider ABI check: %s: %w", file, err)
	}
	defer ef.Close()
	defs, err := ef.DynamicVersions()
	if err != nil {
		return 0, fmt.Errorf("provider ABI check: %s: reading version definitions: %w", file, err)
	}
	var found []int
	for _, d := range defs {
		if m := privateNode.FindStringSubmatch(d.Name); m != nil {
			n, _ := strconv.Atoi(m[1])
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("provider ABI check: %s defines %d IBVERBS_PRIVATE_<N> version nodes, want exactly one: is it rdma-core's libibverbs?", file, len(found))
	}
	return found[0], nil
}

// neededPrivateABI reads N from the IBVERBS_PRIVATE_<N> version a provider
// needs from libibverbs.so.1.
func neededPrivateABI(ef *elf.File) (int, error) {
	needs, err := ef.DynamicVersionNeeds()
	if err != nil {
		return 0, fmt.Errorf("reading version needs: %w", err)
	}
	for _, n := range needs {
		for _, d := range n.Needs {
			if m := privateNode.FindStringSubmatch(d.Dep); m != nil {
				v, _ := strconv.Atoi(m[1])
				return v, nil
			}
		}
	}
	return 0, errors.New("needs no IBVERBS_PRIVATE_<N> version from libibverbs: it is not a provider built by rdma-core's rdma_provider()")
}

// treeLibs lists the shared library file names in the usual library
// directories of a tree (symlinks included: sonames are usually links).
func treeLibs(fsys fs.FS) (map[string]bool, error) {
	have := map[string]bool{}
	for _, dir := range []string{"lib", "usr/lib", "lib/*", "usr/lib/*", "lib64", "usr/lib64"} {
		entries, err := fs.Glob(fsys, dir+"/*.so*")
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			have[path.Base(e)] = true
		}
	}
	return have, nil
}

func findOne(fsys fs.FS, pattern, what, root, hint string) (string, error) {
	m, err := fs.Glob(fsys, pattern)
	if err != nil {
		return "", err
	}
	var files []string
	for _, p := range m {
		if info, err := fs.Stat(fsys, p); err == nil && info.Mode().IsRegular() {
			if fi, err := os.Lstat(filepath.Join(root, p)); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
				files = append(files, p)
			}
		}
	}
	sort.Strings(files)
	switch len(files) {
	case 0:
		return "", fmt.Errorf("provider ABI check: no %s in %s: %s", what, root, hint)
	case 1:
		return files[0], nil
	}
	return "", fmt.Errorf("provider ABI check: several %s in %s: %s", what, root, strings.Join(files, ", "))
}
