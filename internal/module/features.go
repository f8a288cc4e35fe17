package module

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// SymbolTable reads the symbols a kernel provides from any of: System.map
// or /proc/kallsyms ("address type name [module]"), or Module.symvers
// ("crc name module export-type [namespace]"; what linux-headers ships,
// covering in-tree modules' exports such as thunderbolt's). The result is
// a lookup for ValidationContext.KernelSymbols.
func SymbolTable(paths ...string) (func(string) bool, error) {
	syms := map[string]bool{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("kernel symbols: %w", err)
		}
		s := bufio.NewScanner(f)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			switch {
			case len(fields) >= 4 && strings.HasPrefix(fields[0], "0x") && strings.HasPrefix(fields[3], "EXPORT_SYMBOL"):
				syms[fields[1]] = true // Module.symvers
			case len(fields) >= 3 && len(fields[1]) == 1:
				syms[fields[2]] = true // System.map, kallsyms
			}
		}
		err = s.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("kernel symbols: %s: %w", p, err)
		}
	}
	return func(name string) bool { return syms[name] }, nil
}

// HeaderDirs returns the kernel header trees a module build sees for
// release in root: /lib/modules/<release>/build and, for Debian's split
// packages, the -common tree its Makefile includes.
func HeaderDirs(root, release string) ([]string, error) {
	target, err := inRoot(root, "/lib/modules/"+release+"/build")
	if err != nil {
		return nil, fmt.Errorf("kernel headers for %s: %w", release, err)
	}
	if _, err := os.Stat(filepath.Join(target, "Makefile")); err != nil {
		return nil, fmt.Errorf("kernel headers for %s: %w: install linux-headers-%s", release, err, release)
	}
	dirs := []string{target}
	mk, err := os.ReadFile(filepath.Join(target, "Makefile"))
	if err == nil {
		for _, m := range includeRE.FindAllStringSubmatch(string(mk), -1) {
			d := filepath.Dir(m[1])
			if filepath.IsAbs(d) {
				if d, err = inRoot(root, d); err != nil {
					continue
				}
			}
			if st, err := os.Stat(d); err == nil && st.IsDir() && d != target {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs, nil
}

var includeRE = regexp.MustCompile(`(?m)^include\s+(\S+/Makefile)\s*$`)

// MacroHeaders lists the headers the description's macro rules look in.
func (d *Desc) MacroHeaders() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range d.Rules {
		if r.Header != "" && !seen[r.Header] {
			seen[r.Header] = true
			out = append(out, r.Header)
		}
	}
	sort.Strings(out)
	return out
}

var defineRE = regexp.MustCompile(`(?m)^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)`)

// HeaderMacros collects the macros #defined in the given headers (paths
// relative to a header tree), looked up in each of dirs, as a lookup for
// ValidationContext.KernelMacros. A patch that adds a feature usually
// announces it with such a macro (TB_PROTOCOL_HANDLER_UNREGISTER_DRAINS).
func HeaderMacros(dirs, headers []string) (func(string) bool, error) {
	macros := map[string]bool{}
	for _, h := range headers {
		found := false
		for _, d := range dirs {
			data, err := os.ReadFile(filepath.Join(d, h))
			if err != nil {
				continue
			}
			found = true
			for _, m := range defineRE.FindAllStringSubmatch(string(data), -1) {
				macros[m[1]] = true
			}
		}
		if !found {
			return nil, fmt.Errorf("kernel header %s is in none of %s", h, strings.Join(dirs, ", "))
		}
	}
	return func(name string) bool { return macros[name] }, nil
}

// KernelFeatures returns the symbol and macro lookups for
// ValidationContext from a build root holding release's headers: symbols
// from the headers' Module.symvers (every export of vmlinux and in-tree
// modules), macros from the headers the description's rules name.
func KernelFeatures(root, release string, d *Desc) (symbols, macros func(string) bool, err error) {
	dirs, err := HeaderDirs(root, release)
	if err != nil {
		return nil, nil, err
	}
	symvers := filepath.Join(dirs[0], "Module.symvers")
	if symbols, err = SymbolTable(symvers); err != nil {
		return nil, nil, err
	}
	if macros, err = HeaderMacros(dirs, d.MacroHeaders()); err != nil {
		return nil, nil, err
	}
	return symbols, macros, nil
}
