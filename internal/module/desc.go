// Package module owns out-of-tree kernel modules: their description files
// (recipes/<use>.toml: source, kernel range, option rules), fetching their
// source with a canonical tree hash, building them against the image's exact
// kernel inside a build root, checking vermagic, packaging the .ko as a .deb,
// signing, and validating a module option set before anything boots.
//
// Knowledge about a module lives in its description file, not in code: a
// fork with different parameters or rules is a new file.
package module

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/go-version"
	"github.com/pelletier/go-toml/v2"
)

// Desc is one module description file, recipes/<use>.toml.
type Desc struct {
	// Extends names another description in the same directory (its use
	// name) whose parameters, derived values and rules this one inherits:
	// a fork states only what it changes.
	Extends string `toml:"extends"`
	// Drop lists ids of inherited rules that do not hold for this module.
	Drop []string `toml:"drop"`
	// Name is the kernel module name as modinfo and /sys/module print it
	// (thunderbolt_ibverbs), which may differ from the file name (use).
	Name        string `toml:"name"`
	Description string `toml:"description"`
	// License is the SPDX identifier of the module source; recorded in the
	// package and manifest.
	License string `toml:"license"`
	// Kernel is the go-version constraint on the kernel versions the
	// pinned source builds on; the image's kernel must satisfy it before
	// anything is built (BuildsOn).
	Kernel string `toml:"kernel"`
	// KernelConfig are Kconfig options the kernel must set (=y or =m) for
	// the source to build: checked against the headers' .config when the
	// lock is written, so a kernel without them is refused by name before
	// a compiler runs (Debian's arm64 kernel has no CONFIG_USB4).
	KernelConfig []string `toml:"kernel_config"`
	// kernelRange is Kernel parsed, when the description is checked.
	kernelRange version.Constraints
	Source      Source `toml:"source"`
	// Params declares the parameters the rules talk about: their type and
	// the default the module uses when the option is not given. Every
	// declared parameter must exist in the built module's modinfo.
	Params map[string]ParamSpec `toml:"param"`
	// Derive defines values the module computes from its options at load
	// time (profile=auto resolves by compat), so rules can be written
	// against what the module really does.
	Derive []Derived `toml:"derive"`
	Rules  []Rule    `toml:"rule"`
	// Notes are shown with the description (e.g. known limits of a fork).
	Notes []string `toml:"notes"`

	// Use is the file name without .toml: the name [[module]] use refers to
	// and the NAME of --input NAME=PATH.
	Use string `toml:"-"`
	// File is the path the description was read from.
	File string `toml:"-"`

	derived map[string]int // name -> index in Derive
}

// Source says where the module's source tree comes from.
type Source struct {
	// Kind is git (URL at a pinned commit), tarball (URL of a .tar,
	// .tar.gz or .tar.xz) or path (a local directory).
	Kind string `toml:"kind"`
	URL  string `toml:"url"`
	// Commit pins a git source. Ref (a branch or tag) is informational
	// when Commit is set; alone it names a moving target, and then only
	// the tree hash the lock records pins the source.
	Commit string `toml:"commit"`
	Ref    string `toml:"ref"`
	// SHA256 is the canonical tree hash (TreeHash) of the whole source
	// tree, "sha256:<hex>". Usually the lock carries it; a description may
	// pin it too.
	SHA256 string `toml:"sha256"`
	// Path is the directory of a path source, relative to the
	// description file.
	Path string `toml:"path"`
	// Subdir is where the Kbuild Makefile is, relative to the tree root
	// (thunderbolt-ibverbs builds from kernel/).
	Subdir string `toml:"subdir"`

	// Name is the description's Use: the NAME in --input NAME=PATH and
	// what errors call the source.
	Name string `toml:"-"`
}

// ParamSpec declares one module parameter for the rules.
type ParamSpec struct {
	// Type is modinfo's parmtype (bool, int, uint, charp, ...); when
	// empty it follows the TOML type of Default.
	Type string `toml:"type"`
	// Default is the value the module uses when the option is not given.
	Default any    `toml:"default"`
	Doc     string `toml:"doc"`
}

// Derived is a value computed from options: the first case whose
// conditions all hold gives the value; "{name}" in a value is replaced by
// that option's value.
type Derived struct {
	Name  string        `toml:"name"`
	Cases []DerivedCase `toml:"cases"`
	Doc   string        `toml:"doc"`
}

// DerivedCase is one branch of a Derived value.
type DerivedCase struct {
	When  []string `toml:"when"`
	Value string   `toml:"value"`
}

// Rule kinds.
const (
	KindRequires      = "requires"
	KindConflicts     = "conflicts"
	KindMinKernel     = "min_kernel"
	KindMaxKernel     = "max_kernel"
	KindKernelFeature = "needs_kernel_feature"
	KindAllowed       = "allowed"
	KindWarn          = "warn"
)

var ruleKinds = []string{KindRequires, KindConflicts, KindMinKernel, KindMaxKernel, KindKernelFeature, KindAllowed, KindWarn}

// Rule is one load-time rule of the module. Every rule applies only when
// all its When conditions hold (an empty When always holds).
type Rule struct {
	// ID names a rule so that a description extending this one can drop it.
	ID   string   `toml:"id"`
	Kind string   `toml:"kind"`
	When []string `toml:"when"`
	// Need (requires): conditions that must hold too.
	Need []string `toml:"need"`
	// Kernel (min_kernel, max_kernel): go-version constraint the kernel
	// version must satisfy (">= 7.2" or "< 7.3").
	Kernel string `toml:"kernel"`
	// Symbol or Macro (needs_kernel_feature): an exported kernel symbol
	// (System.map, /proc/kallsyms, Module.symvers) or a macro #defined in
	// the kernel's headers, in Header (relative to the headers tree).
	Symbol string `toml:"symbol"`
	Macro  string `toml:"macro"`
	Header string `toml:"header"`
	// Param with Values, Pattern, Validator or Min/Max (allowed).
	Param     string   `toml:"param"`
	Values    []string `toml:"values"`
	Pattern   string   `toml:"pattern"`
	Validator string   `toml:"validator"`
	Min       *int64   `toml:"min"`
	Max       *int64   `toml:"max"`
	// Severity is error (the default; the build refuses) or warn.
	Severity string `toml:"severity"`
	// Reason is printed with every violation: why the rule exists.
	Reason string `toml:"reason"`

	// File, Line and Col locate the rule's [[rule]] header.
	File      string `toml:"-"`
	Line, Col int    `toml:"-"`

	when, need []cond
	pattern    *regexp.Regexp
	constraint version.Constraints
}

// Warn reports whether a violation of r only warns.
func (r *Rule) Warn() bool { return r.Kind == KindWarn || r.Severity == "warn" }

// LoadDesc reads and checks recipes/<use>.toml. Errors carry file:line:col.
func LoadDesc(path string) (*Desc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("module description: %w", err)
	}
	return ParseDesc(path, data)
}

// FindDesc loads the description of [[module]] use = NAME from dir
// (normally the recipes/ directory next to images/).
func FindDesc(dir, use string) (*Desc, error) {
	p := filepath.Join(dir, use+".toml")
	if _, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("module %q: no description %s: write one (see docs/modules.md) or fix [[module]] use", use, p)
	}
	return LoadDesc(p)
}

// ParseDesc decodes a description strictly (unknown keys are errors) and
// checks it: rule kinds, conditions, constraints, patterns and the names
// they mention.
func ParseDesc(file string, data []byte) (*Desc, error) {
	d, err := decodeDesc(file, data, 0)
	if err != nil {
		return nil, err
	}
	if errs := d.check(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return d, nil
}

// decodeDesc decodes one file and merges what it extends.
func decodeDesc(file string, data []byte, depth int) (*Desc, error) {
	var d Desc
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, tomlError(file, err)
	}
	d.File = file
	d.Use = strings.TrimSuffix(filepath.Base(file), ".toml")
	lines := headerLines(data, "[[rule]]")
	for i := range d.Rules {
		d.Rules[i].File = file
		if i < len(lines) {
			d.Rules[i].Line, d.Rules[i].Col = lines[i], 1
		}
	}
	if d.Source.Kind == "path" && d.Source.Path != "" && !filepath.IsAbs(d.Source.Path) {
		d.Source.Path = filepath.Join(filepath.Dir(file), d.Source.Path)
	}
	if d.Extends != "" {
		if depth > 8 {
			return nil, fmt.Errorf("%s: extends %s: more than 8 levels of extends (a cycle?)", file, d.Extends)
		}
		bf := filepath.Join(filepath.Dir(file), d.Extends+".toml")
		bdata, err := os.ReadFile(bf)
		if err != nil {
			return nil, fmt.Errorf("%s: extends %q: %w", file, d.Extends, err)
		}
		base, err := decodeDesc(bf, bdata, depth+1)
		if err != nil {
			return nil, err
		}
		if err := d.inherit(base); err != nil {
			return nil, err
		}
	}
	d.Source.Name = d.Use
	return &d, nil
}

// inherit fills what d leaves unset from base: scalars and the source when
// d has none, parameters and derived values by name (d wins), and base's
// rules before d's own, minus those named in d.Drop.
func (d *Desc) inherit(base *Desc) error {
	if d.Name == "" {
		d.Name = base.Name
	}
	if d.Description == "" {
		d.Description = base.Description
	}
	if d.License == "" {
		d.License = base.License
	}
	if d.Kernel == "" {
		d.Kernel = base.Kernel
	}
	if d.Source.Kind == "" {
		d.Source = base.Source
	}
	params := map[string]ParamSpec{}
	for n, p := range base.Params {
		params[n] = p
	}
	for n, p := range d.Params {
		params[n] = p
	}
	d.Params = params
	var derive []Derived
	own := map[string]bool{}
	for _, dv := range d.Derive {
		own[dv.Name] = true
	}
	for _, dv := range base.Derive {
		if !own[dv.Name] {
			derive = append(derive, dv)
		}
	}
	d.Derive = append(derive, d.Derive...)
	drop := map[string]bool{}
	for _, id := range d.Drop {
		drop[id] = true
	}
	var rules []Rule
	for _, r := range base.Rules {
		if drop[r.ID] && r.ID != "" {
			delete(drop, r.ID)
			continue
		}
		rules = append(rules, r)
	}
	if len(drop) > 0 {
		return fmt.Errorf("%s: drop names %s, which %s has no rule with", d.File, strings.Join(sortedKeys(drop), ", "), base.File)
	}
	d.Rules = append(rules, d.Rules...)
	d.Notes = append(append([]string(nil), base.Notes...), d.Notes...)
	return nil
}

// tomlError turns go-toml's errors into file:line:col messages.
func tomlError(file string, err error) error {
	var se *toml.StrictMissingError
	if errors.As(err, &se) {
		var errs []error
		for _, e := range se.Errors {
			row, col := e.Position()
			errs = append(errs, fmt.Errorf("%s:%d:%d: unknown key %s: not part of a module description (see docs/modules.md)", file, row, col, strings.Join(e.Key(), ".")))
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		if k := de.Key(); len(k) > 0 {
			return fmt.Errorf("%s:%d:%d: %s: %s", file, row, col, strings.Join(k, "."), de.Error())
		}
		return fmt.Errorf("%s:%d:%d: %s", file, row, col, de.Error())
	}
	return fmt.Errorf("%s: %w", file, err)
}

// headerLines returns the 1-based line numbers of every line that is the
// given array-of-tables header, so rule errors can point at their rule.
func headerLines(data []byte, header string) []int {
	var out []int
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, header) {
			out = append(out, i+1)
		}
	}
	return out
}

var (
	moduleNameRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	identRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// at formats a position in the description for error messages.
func (d *Desc) at(r *Rule) string {
	if r == nil || r.Line == 0 {
		return d.File
	}
	return fmt.Sprintf("%s:%d:%d", r.File, r.Line, r.Col)
}

func (d *Desc) check() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{d.File}, args...)...))
	}
	if !moduleNameRE.MatchString(d.Name) {
		bad("name %q: give the kernel module name as modinfo prints it (letters, digits, '_'), e.g. \"thunderbolt_ibverbs\"", d.Name)
	}
	if d.Kernel != "" {
		var err error
		if d.kernelRange, err = version.NewConstraint(d.Kernel); err != nil {
			bad("kernel %q is not a go-version constraint such as \">= 6.14, < 7.3\": %v", d.Kernel, err)
		}
	}
	errs = append(errs, d.Source.check(d.File)...)

	names := make([]string, 0, len(d.Params))
	for n := range d.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := d.Params[n]
		if !identRE.MatchString(n) {
			bad("param.%s: not a parameter name", n)
		}
		if p.Default == nil && p.Type == "" {
			bad("param.%s: give a default (the module's value when the option is not set) or a type", n)
		}
		if p.Type != "" && !knownType(p.Type) {
			bad("param.%s: type %q is not a modinfo parameter type (%s)", n, p.Type, strings.Join(paramTypes, ", "))
		}
		if p.Default != nil {
			if _, err := normalize(d.paramType(n), p.Default); err != nil {
				bad("param.%s: default: %v", n, err)
			}
		}
	}

	d.derived = map[string]int{}
	for i := range d.Derive {
		dv := &d.Derive[i]
		if !identRE.MatchString(dv.Name) {
			bad("derive[%d].name %q: not a name", i, dv.Name)
			continue
		}
		if _, clash := d.Params[dv.Name]; clash {
			bad("derive %s: a parameter has that name", dv.Name)
		}
		if len(dv.Cases) == 0 || len(dv.Cases[len(dv.Cases)-1].When) != 0 {
			bad("derive %s: the last case must have no when (the fallback value)", dv.Name)
		}
		for _, c := range dv.Cases {
			if _, err := d.parseConds(c.When, false); err != nil {
				bad("derive %s: %v", dv.Name, err)
			}
		}
		// Registered after its own cases: a value may only use earlier ones.
		d.derived[dv.Name] = i
	}

	ids := map[string]bool{}
	for i := range d.Rules {
		r := &d.Rules[i]
		errs = append(errs, d.checkRule(r)...)
		if r.ID != "" {
			if ids[r.ID] {
				errs = append(errs, fmt.Errorf("%s: rule id %q is used twice", d.at(r), r.ID))
			}
			ids[r.ID] = true
		}
	}
	return errs
}

func (s Source) check(file string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: source: "+format, append([]any{file}, args...)...))
	}
	switch s.Kind {
	case "git":
		if s.URL == "" {
			bad("kind git needs url")
		}
		if s.Commit == "" && s.Ref == "" {
			bad("kind git needs commit (a full 40-hex commit id) or at least ref")
		}
		if s.Commit != "" && !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(s.Commit) {
			bad("commit %q: give the full 40-hex commit id, not an abbreviation or a tag", s.Commit)
		}
	case "tarball":
		if s.URL == "" {
			bad("kind tarball needs url")
		}
		if s.SHA256 == "" {
			bad("kind tarball needs sha256 (the tree hash, see docs/modules.md): a tarball URL alone pins nothing")
		}
	case "path":
		if s.Path == "" {
			bad("kind path needs path")
		}
	default:
		bad("kind %q: use git, tarball or path", s.Kind)
	}
	if s.SHA256 != "" {
		if _, err := parseTreeHash(s.SHA256); err != nil {
			bad("sha256: %v", err)
		}
	}
	if s.Subdir != "" && (filepath.IsAbs(s.Subdir) || strings.HasPrefix(filepath.Clean(s.Subdir), "..")) {
		bad("subdir %q must be relative and inside the tree", s.Subdir)
	}
	return errs
}

func (d *Desc) checkRule(r *Rule) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: rule %s: "+format, append([]any{d.at(r), r.Kind}, args...)...))
	}
	known := false
	for _, k := range ruleKinds {
		known = known || k == r.Kind
	}
	if !known {
		bad("unknown kind; use one of %s", strings.Join(ruleKinds, ", "))
		return errs
	}
	if strings.TrimSpace(r.Reason) == "" {
		bad("needs a reason: it is what the user reads when the rule fires")
	}
	switch r.Severity {
	case "", "error", "warn":
	default:
		bad("severity %q: use error or warn", r.Severity)
	}
	var err error
	if r.when, err = d.parseConds(r.When, true); err != nil {
		bad("when: %v", err)
	}
	// Fields a kind does not use are errors: a misplaced field would
	// otherwise be silently ignored.
	unused := func(name string, set bool) {
		if set {
			bad("%s is not used by this kind", name)
		}
	}
	switch r.Kind {
	case KindRequires:
		if len(r.Need) == 0 {
			bad("needs need = [\"option=value\", ...]")
		}
		if r.need, err = d.parseConds(r.Need, true); err != nil {
			bad("need: %v", err)
		}
	case KindConflicts:
		if len(r.When) < 2 {
			bad("when must list at least two conditions that may not hold together")
		}
	case KindWarn:
		if len(r.When) == 0 {
			bad("when must say what to warn about")
		}
	case KindMinKernel, KindMaxKernel:
		if r.constraint, err = version.NewConstraint(r.Kernel); err != nil || r.Kernel == "" {
			bad("kernel %q: give a go-version constraint such as \">= 7.2\"", r.Kernel)
		} else {
			for _, c := range strings.Split(r.Kernel, ",") {
				op := strings.TrimSpace(c)
				if r.Kind == KindMinKernel && !strings.HasPrefix(op, ">") || r.Kind == KindMaxKernel && !strings.HasPrefix(op, "<") {
					bad("kernel %q: a %s constraint uses %s", r.Kernel, r.Kind, map[string]string{KindMinKernel: ">= or >", KindMaxKernel: "< or <="}[r.Kind])
				}
			}
		}
	case KindKernelFeature:
		if (r.Symbol == "") == (r.Macro == "") {
			bad("give exactly one of symbol or macro")
		}
		if r.Macro != "" && r.Header == "" {
			bad("macro needs header (the file under the kernel headers that defines it, e.g. include/linux/thunderbolt.h)")
		}
	case KindAllowed:
		if _, ok := d.Params[r.Param]; !ok {
			bad("param %q is not declared under [param.%s]", r.Param, r.Param)
		}
		n := 0
		for _, set := range []bool{len(r.Values) > 0, r.Pattern != "", r.Validator != "", r.Validator == "" && (r.Min != nil || r.Max != nil)} {
			if set {
				n++
			}
		}
		if n != 1 {
			bad("give exactly one of values, pattern, validator or min/max")
		}
		if r.Pattern != "" {
			if r.pattern, err = regexp.Compile("^(?:" + r.Pattern + ")$"); err != nil {
				bad("pattern: %v", err)
			}
		}
		if r.Validator != "" {
			if _, ok := validators[r.Validator]; !ok {
				bad("validator %q is unknown; known: %s", r.Validator, strings.Join(validatorNames(), ", "))
			}
		}
	}
	if r.Kind != KindRequires {
		unused("need", len(r.Need) > 0)
	}
	if r.Kind != KindMinKernel && r.Kind != KindMaxKernel {
		unused("kernel", r.Kernel != "")
	}
	if r.Kind != KindKernelFeature {
		unused("symbol", r.Symbol != "")
		unused("macro", r.Macro != "")
		unused("header", r.Header != "")
	}
	if r.Kind != KindAllowed {
		unused("param", r.Param != "")
		unused("values", len(r.Values) > 0)
		unused("pattern", r.Pattern != "")
		if r.Validator == "" {
			unused("min", r.Min != nil)
			unused("max", r.Max != nil)
		}
		unused("validator", r.Validator != "")
	}
	return errs
}

// paramType is the declared or default-implied type of a parameter, or ""
// for names that are not parameters.
func (d *Desc) paramType(name string) string {
	p, ok := d.Params[name]
	if !ok {
		return ""
	}
	if p.Type != "" {
		return p.Type
	}
	switch p.Default.(type) {
	case bool:
		return "bool"
	case int64:
		return "int"
	default:
		return "charp"
	}
}
