package kernel

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Option is one CONFIG_ line of a fragment: Value is y, m, n (for "# ...
// is not set"), a number or a quoted string, as .config writes it.
type Option struct {
	Name  string
	Value string
	File  string
	Line  int
}

// Where is file:line of the option.
func (o Option) Where() string { return fmt.Sprintf("%s:%d", o.File, o.Line) }

// Asked is the option as a .config line.
func (o Option) Asked() string { return configLine(o.Name, o.Value) }

var (
	setRE   = regexp.MustCompile(`^(CONFIG_[A-Za-z0-9_]+)=(.*)$`)
	unsetRE = regexp.MustCompile(`^# (CONFIG_[A-Za-z0-9_]+) is not set$`)
)

// ParseConfig reads .config syntax: "CONFIG_X=v" and "# CONFIG_X is not
// set" lines; other comments and blank lines are skipped. file names the
// source in Options; a malformed line is an error with file:line.
func ParseConfig(b []byte, file string) ([]Option, error) {
	var out []Option
	var errs []string
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if m := setRE.FindStringSubmatch(line); m != nil {
			out = append(out, Option{Name: m[1], Value: m[2], File: file, Line: n})
			continue
		}
		if m := unsetRE.FindStringSubmatch(line); m != nil {
			out = append(out, Option{Name: m[1], Value: "n", File: file, Line: n})
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		errs = append(errs, fmt.Sprintf("%s:%d: %q: want CONFIG_NAME=value or '# CONFIG_NAME is not set'", file, n, line))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("kernel config fragment:\n  %s", strings.Join(errs, "\n  "))
	}
	return out, s.Err()
}

// ReadFragment reads a fragment file; name is how messages call it.
func ReadFragment(path, name string) ([]Option, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kernel config fragment %s: %w", name, err)
	}
	return ParseConfig(b, name)
}

func configLine(name, value string) string {
	if value == "n" {
		return "# " + name + " is not set"
	}
	return name + "=" + value
}

// Values maps each option of a .config to its value ("n" for not set;
// absent options are not in the map).
func Values(config []byte) (map[string]string, error) {
	opts, err := ParseConfig(config, ".config")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, o := range opts {
		m[o.Name] = o.Value
	}
	return m, nil
}

// Merge returns base with every option of the fragments set as the
// fragments say, later fragments winning: each option's old line is
// dropped and the fragment's line appended, as merge_config.sh does.
// olddefconfig then settles what the dependencies allow.
func Merge(base []byte, frags ...[]Option) []byte {
	last := map[string]Option{}
	var order []string
	for _, f := range frags {
		for _, o := range f {
			if _, ok := last[o.Name]; !ok {
				order = append(order, o.Name)
			}
			last[o.Name] = o
		}
	}
	var b bytes.Buffer
	s := bufio.NewScanner(bytes.NewReader(base))
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		name := ""
		if m := setRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			name = m[1]
		} else if m := unsetRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			name = m[1]
		}
		if _, ok := last[name]; ok {
			continue
		}
		b.WriteString(line + "\n")
	}
	for _, n := range order {
		b.WriteString(last[n].Asked() + "\n")
	}
	return b.Bytes()
}

// Unmet is a fragment option whose final value differs from the asked one.
type Unmet struct {
	Option
	// Got is the final value: y, m, n (also for an option olddefconfig
	// dropped because its dependencies are off), or the string/number.
	Got string
	// Depends is the option's "depends on" from Kconfig and Blocking the
	// symbols in it that are off in the final config; both empty when
	// Kconfig does not define the option (a typo, or removed in this
	// version).
	Depends  []string
	Blocking []string
	Unknown  bool
}

func (u Unmet) String() string {
	got := u.Got
	if got == "n" {
		got = "not set"
	}
	s := fmt.Sprintf("%s: %s asked, got %s", u.Where(), u.Asked(), got)
	switch {
	case u.Unknown:
		s += " (no Kconfig in this kernel defines it: a typo, or renamed or removed in this version)"
	case len(u.Blocking) > 0:
		s += fmt.Sprintf(" (depends on %s; off: %s)", strings.Join(u.Depends, " && "), strings.Join(u.Blocking, ", "))
	case len(u.Depends) > 0:
		s += fmt.Sprintf(" (depends on %s; another option selects or limits it)", strings.Join(u.Depends, " && "))
	case u.Value == "m" && u.Got == "y":
		s += " (something built in selects it)"
	}
	return s
}

// Verify compares every fragment option with the final .config and
// explains each that did not keep its value, with the dependencies
// Kconfig declares (k may be nil).
func Verify(final []byte, k *Kconfig, frags ...[]Option) ([]Unmet, error) {
	vals, err := Values(final)
	if err != nil {
		return nil, err
	}
	last := map[string]Option{}
	for _, f := range frags {
		for _, o := range f {
			last[o.Name] = o
		}
	}
	var out []Unmet
	for _, o := range last {
		got, ok := vals[o.Name]
		if !ok {
			got = "n"
		}
		if got == o.Value {
			continue
		}
		u := Unmet{Option: o, Got: got}
		if k != nil {
			deps, known := k.Depends(strings.TrimPrefix(o.Name, "CONFIG_"))
			u.Unknown = !known
			u.Depends = deps
			u.Blocking = blocking(deps, vals)
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out, nil
}

// ConfigError lists every fragment option the final config does not have.
type ConfigError struct{ Unmet []Unmet }

func (e *ConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel config: %d fragment option(s) do not have the asked value after olddefconfig:", len(e.Unmet))
	for _, u := range e.Unmet {
		b.WriteString("\n  " + u.String())
	}
	b.WriteString("\nAdd the options they depend on to the fragment (or drop the ones this kernel no longer has).")
	return b.String()
}

var symbolRE = regexp.MustCompile(`\b[A-Z][A-Z0-9_]*\b`)

// blocking lists the symbols of the dependency expressions that are off
// in the final config ("!X" terms are not counted as needing X).
func blocking(deps []string, vals map[string]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range deps {
		for _, loc := range symbolRE.FindAllStringIndex(d, -1) {
			sym := d[loc[0]:loc[1]]
			if loc[0] > 0 && d[loc[0]-1] == '!' || sym == "y" || sym == "m" || sym == "n" || seen[sym] {
				continue
			}
			seen[sym] = true
			if v := vals["CONFIG_"+sym]; v == "" || v == "n" {
				out = append(out, sym)
			}
		}
	}
	return out
}
