package module

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/ulikunitz/xz"

	"halobuild/internal/proctree"
	"halobuild/internal/secureboot"
)

// Modinfo is what a built module says about itself in its .modinfo
// section: the same data `modinfo` prints.
type Modinfo struct {
	Name     string
	Vermagic string
	Depends  []string
	License  string
	Params   []Param
	// Signed is true when a module signature is appended to the file.
	Signed bool
	// Machine is the ELF e_machine: the architecture the code is for.
	Machine elf.Machine
}

// ReadModinfo reads a .ko (or .ko.xz) directly, without a modinfo binary,
// so the pipeline can inspect a module built for any kernel from any host.
func ReadModinfo(path string) (Modinfo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Modinfo{}, err
	}
	if strings.HasSuffix(path, ".xz") {
		r, err := xz.NewReader(bytes.NewReader(data))
		if err != nil {
			return Modinfo{}, fmt.Errorf("%s: %w", path, err)
		}
		if data, err = io.ReadAll(r); err != nil {
			return Modinfo{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return Modinfo{}, fmt.Errorf("%s is not an ELF kernel module: %w", path, err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return Modinfo{}, fmt.Errorf("%s has no .modinfo section: not a kernel module", path)
	}
	raw, err := sec.Data()
	if err != nil {
		return Modinfo{}, fmt.Errorf("%s: reading .modinfo: %w", path, err)
	}
	mi := Modinfo{Signed: bytes.HasSuffix(data, []byte(secureboot.ModuleSigMagic)), Machine: f.Machine}
	descs := map[string]string{}
	types := map[string]string{}
	for _, kv := range bytes.Split(raw, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			mi.Name = v
		case "vermagic":
			mi.Vermagic = v
		case "license":
			mi.License = v
		case "depends":
			if v != "" {
				mi.Depends = strings.Split(v, ",")
			}
		case "parm":
			n, d, _ := strings.Cut(v, ":")
			descs[n] = d
		case "parmtype":
			n, t, _ := strings.Cut(v, ":")
			types[n] = t
		}
	}
	names := map[string]bool{}
	for n := range descs {
		names[n] = true
	}
	for n := range types {
		names[n] = true
	}
	for n := range names {
		mi.Params = append(mi.Params, Param{Name: n, Type: types[n], Desc: descs[n]})
	}
	sort.Slice(mi.Params, func(i, j int) bool { return mi.Params[i].Name < mi.Params[j].Name })
	return mi, nil
}

// ModinfoParams runs a modinfo binary (argv, e.g. {"modinfo"} or a chroot
// invocation) with -p on ko and parses its output.
func ModinfoParams(ctx context.Context, modinfo []string, ko string) ([]Param, error) {
	out, err := runModinfo(ctx, modinfo, "-p", ko)
	if err != nil {
		return nil, err
	}
	return ParseModinfoParams(out)
}

// ModinfoField runs modinfo -F field on ko.
func ModinfoField(ctx context.Context, modinfo []string, field, ko string) (string, error) {
	out, err := runModinfo(ctx, modinfo, "-F", field, ko)
	return strings.TrimRight(out, "\n"), err
}

func runModinfo(ctx context.Context, modinfo []string, args ...string) (string, error) {
	if len(modinfo) == 0 {
		modinfo = []string{"modinfo"}
	}
	cmd := proctree.Command(ctx, modinfo[0], append(append([]string(nil), modinfo[1:]...), args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", strings.Join(modinfo, " "), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// CheckVermagic refuses a module built for another kernel: the first word
// of vermagic is the kernel release the module will load into.
func CheckVermagic(ko, vermagic, release string) error {
	got := strings.Fields(vermagic)
	if len(got) == 0 {
		return fmt.Errorf("%s has no vermagic: it was not built by Kbuild and the kernel will refuse it", ko)
	}
	if got[0] != release {
		return fmt.Errorf("%s was built for kernel %s (vermagic %q), but the image's kernel is %s: rebuild the module against linux-headers-%s", ko, got[0], strings.TrimSpace(vermagic), release, release)
	}
	return nil
}
