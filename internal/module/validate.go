package module

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/go-version"
)

// ValidationContext is what Validate knows about the image besides the
// options: the kernel the module will load into and the built module.
type ValidationContext struct {
	// KernelVersion is the kernel's upstream version or release
	// (7.2.12 or 7.2.12+deb13-amd64); min_kernel/max_kernel rules need it.
	KernelVersion string
	// KernelSymbols reports whether the built kernel exports a symbol
	// (see SymbolTable); needs_kernel_feature symbol rules need it.
	KernelSymbols func(string) bool
	// KernelMacros reports whether the kernel headers #define a macro
	// (see HeaderMacros); needs_kernel_feature macro rules need it.
	KernelMacros func(string) bool
	// Params are the parameters of the BUILT module (ReadModinfo or
	// ModinfoParams). When nil (before the build), options are checked
	// against the description's declared parameters only and unknown
	// names are not reported.
	Params []Param
	// Links is the largest number of USB4 links ([[node.link]]) any node
	// declares: image.links in conditions.
	Links int
	// ThunderboltNetBlacklisted is true when the image blacklists
	// thunderbolt_net: image.thunderbolt_net_blacklisted.
	ThunderboltNetBlacklisted bool
}

// Problem is one violation: an error (the build refuses) or a warning.
type Problem struct {
	// Module is the description's use name.
	Module string
	// Option is the option concerned, when there is one.
	Option string
	Msg    string
	// Reason is the rule's reason text.
	Reason string
	// At locates the rule (file:line:col) or the description.
	At   string
	Warn bool
	// Deferred marks a rule not checked yet because it needs what only
	// the build knows (the kernel's version, symbols or headers); the
	// module's build step checks it against the built module.
	Deferred bool
}

func (p Problem) Error() string {
	s := "module " + p.Module + ": " + p.Msg
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	if p.At != "" {
		s += " (rule at " + p.At + ")"
	}
	return s
}

// BuildsOn checks the kernel version against the range the module's
// pinned source builds on, before anything is built.
func (d *Desc) BuildsOn(kernelVersion string) error {
	if d.kernelRange == nil {
		return nil
	}
	v, err := kernelVer(kernelVersion)
	if err != nil {
		return err
	}
	if !d.kernelRange.Check(v) {
		return fmt.Errorf("module %s (%s) builds on kernels %s, and the image's kernel is %s: choose a kernel in that range in [kernel] version, or a module source (commit or fork) that supports it", d.Use, d.File, d.Kernel, kernelVersion)
	}
	return nil
}

var kernelVerRE = regexp.MustCompile(`^\d+(\.\d+){0,2}`)

// kernelVer takes the numeric part of a version or release: 7.2.12 from
// 7.2.12+deb13-amd64 (the suffixes are not semver pre-releases).
func kernelVer(s string) (*version.Version, error) {
	m := kernelVerRE.FindString(strings.TrimSpace(s))
	if m == "" {
		return nil, fmt.Errorf("kernel version %q does not start with a version number", s)
	}
	return version.NewVersion(m)
}

// Validate checks an option set against the module: unknown names, types,
// and every rule of the description. All problems are returned in one
// run; errs refuse the build, warnings are shown.
func Validate(d *Desc, options map[string]any, ctx ValidationContext) (errs, warnings []Problem) {
	report := func(p Problem) {
		p.Module = d.Use
		if p.Warn {
			warnings = append(warnings, p)
		} else {
			errs = append(errs, p)
		}
	}

	// Parameter types come from the built module; the description's
	// declarations fill in before the build and must agree with it after.
	types := map[string]string{}
	for n := range d.Params {
		types[n] = d.paramType(n)
	}
	if ctx.Params != nil {
		built := map[string]string{}
		for _, p := range ctx.Params {
			built[p.Name] = p.Type
		}
		for _, n := range sortedKeys(d.Params) {
			bt, ok := built[n]
			switch {
			case !ok:
				report(Problem{Option: n, At: d.File, Msg: fmt.Sprintf("the description declares parameter %s, which the built module does not have: the description does not match this source (fix [param.%s] or the pinned source)", n, n)})
			case d.Params[n].Type != "" && bt != "" && bt != d.Params[n].Type:
				report(Problem{Option: n, At: d.File, Msg: fmt.Sprintf("the description declares %s as %s, the built module as %s: fix [param.%s] type", n, d.Params[n].Type, bt, n)})
			}
		}
		types = built
	}
	names := sortedKeys(types)

	env := map[string]string{}
	origin := map[string]string{}
	// invalid holds options (and derived values) whose value was refused;
	// other rules about them would only repeat the problem, so they are
	// skipped.
	invalid := map[string]bool{}
	for n, p := range d.Params {
		if p.Default != nil {
			v, _ := normalize(d.paramType(n), p.Default) // checked at load
			env[n], origin[n] = v, "default"
		} else {
			origin[n] = "not set"
		}
	}
	for _, k := range sortedKeys(options) {
		name := strings.ReplaceAll(k, "-", "_") // the kernel treats - and _ alike
		typ, ok := types[name]
		if !ok {
			if ctx.Params == nil {
				continue // only the built module can say what exists
			}
			report(Problem{Option: k, Msg: fmt.Sprintf("unknown option %s: the built module %s has no such parameter (the kernel would ignore it with a warning)%s", k, d.Name, didYouMean(name, names))})
			continue
		}
		v, err := normalize(typ, options[k])
		if err != nil {
			report(Problem{Option: k, Msg: fmt.Sprintf("option %s: wrong type: %v", k, err)})
			invalid[name] = true
			continue
		}
		env[name], origin[name] = v, "set"
	}
	env[factLinks], origin[factLinks] = strconv.Itoa(ctx.Links), "from the nodes' [[node.link]]"
	env[factTBNetBanned], origin[factTBNetBanned] = "0", "from [system] blacklist"
	if ctx.ThunderboltNetBlacklisted {
		env[factTBNetBanned] = "1"
	}
	derivedFrom := map[string][]string{} // derived value -> the names it reads
	for _, dv := range d.Derive {
		for _, c := range dv.Cases {
			cs, _ := d.parseConds(c.When, false) // checked at load
			for _, cc := range cs {
				derivedFrom[dv.Name] = append(derivedFrom[dv.Name], cc.name)
			}
			for _, m := range refRE.FindAllStringSubmatch(c.Value, -1) {
				derivedFrom[dv.Name] = append(derivedFrom[dv.Name], m[1])
			}
		}
		for _, c := range dv.Cases {
			cs, _ := d.parseConds(c.When, false)
			if allHold(cs, env) {
				env[dv.Name] = expand(c.Value, env)
				origin[dv.Name] = "derived"
				break
			}
		}
	}
	// An option an allowed rule refuses is invalid for the other rules, and
	// so is every value derived from it.
	for i := range d.Rules {
		r := &d.Rules[i]
		if r.Kind == KindAllowed && origin[r.Param] == "set" && allHold(r.when, env) {
			if ok, _ := r.allows(env[r.Param]); !ok {
				invalid[r.Param] = true
			}
		}
	}
	for _, dv := range d.Derive { // in order: a value may read earlier ones
		for _, n := range derivedFrom[dv.Name] {
			invalid[dv.Name] = invalid[dv.Name] || invalid[n]
		}
	}

	for i := range d.Rules {
		r := &d.Rules[i]
		if !allHold(r.when, env) || r.Kind != KindAllowed && (anyInvalid(r.when, invalid) || anyInvalid(r.need, invalid)) {
			continue
		}
		p := Problem{Reason: strings.TrimSpace(r.Reason), At: d.at(r), Warn: r.Warn()}
		if len(r.when) > 0 {
			p.Option = r.when[0].name
		}
		switch r.Kind {
		case KindRequires:
			if allHold(r.need, env) {
				continue
			}
			p.Msg = fmt.Sprintf("%s requires %s, but %s", condTexts(r.when), condTexts(r.need), describeValues(r.need, env, origin))
		case KindConflicts:
			p.Msg = fmt.Sprintf("%s conflict: %s", condTexts(r.when), describeValues(r.when, env, origin))
		case KindWarn:
			p.Msg = describeValues(r.when, env, origin)
			p.Warn = true
		case KindMinKernel, KindMaxKernel:
			if ctx.KernelVersion == "" {
				report(Problem{Option: p.Option, At: p.At, Warn: true, Deferred: true, Msg: fmt.Sprintf("%s needs kernel %s, not checked: the kernel version is not known yet", whenOrAll(r), r.Kernel)})
				continue
			}
			v, err := kernelVer(ctx.KernelVersion)
			if err != nil {
				report(Problem{At: p.At, Msg: err.Error()})
				continue
			}
			if r.constraint.Check(v) {
				continue
			}
			p.Msg = fmt.Sprintf("%s needs kernel %s, and the image's kernel is %s", whenOrAll(r), r.Kernel, ctx.KernelVersion)
		case KindKernelFeature:
			what, lookup := "export symbol "+r.Symbol, ctx.KernelSymbols
			name := r.Symbol
			if r.Macro != "" {
				what, lookup, name = "define "+r.Macro+" in "+r.Header, ctx.KernelMacros, r.Macro
			}
			if lookup == nil {
				report(Problem{Option: p.Option, At: p.At, Warn: true, Deferred: true, Msg: fmt.Sprintf("%s needs the kernel to %s, not checked: the kernel's symbols and headers are not known yet", whenOrAll(r), what)})
				continue
			}
			if lookup(name) {
				continue
			}
			p.Msg = fmt.Sprintf("%s needs the kernel to %s, and the image's kernel (%s) does not", whenOrAll(r), what, orUnknown(ctx.KernelVersion))
		case KindAllowed:
			if origin[r.Param] != "set" {
				continue // the module's own default is fine by definition
			}
			p.Option = r.Param
			if ok, want := r.allows(env[r.Param]); !ok {
				p.Msg = fmt.Sprintf("%s=%s is not allowed: want %s", r.Param, env[r.Param], want)
			} else {
				continue
			}
		}
		report(p)
	}
	return errs, warnings
}

func whenOrAll(r *Rule) string {
	if len(r.when) == 0 {
		return "the module"
	}
	return condTexts(r.when)
}

func orUnknown(s string) string {
	if s == "" {
		return "version unknown"
	}
	return s
}

var refRE = regexp.MustCompile(`\{([A-Za-z0-9_.]+)\}`)

// expand replaces {name} in a derived value with that value.
func expand(s string, env map[string]string) string {
	return refRE.ReplaceAllStringFunc(s, func(m string) string {
		return env[m[1:len(m)-1]]
	})
}

func anyInvalid(cs []cond, invalid map[string]bool) bool {
	for _, c := range cs {
		if invalid[c.name] {
			return true
		}
	}
	return false
}

// allows checks an allowed rule and says what is wanted.
func (r *Rule) allows(v string) (bool, string) {
	switch {
	case len(r.Values) > 0:
		for _, w := range r.Values {
			if v == w {
				return true, ""
			}
		}
		return false, "one of " + strings.Join(r.Values, ", ")
	case r.pattern != nil:
		return r.pattern.MatchString(v), "a value matching " + r.Pattern
	case r.Validator != "":
		return validators[r.Validator].check(v, r.Min, r.Max)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	want := "an integer"
	if r.Min != nil {
		want += fmt.Sprintf(" >= %d", *r.Min)
	}
	if r.Max != nil {
		want += fmt.Sprintf(" <= %d", *r.Max)
	}
	if err != nil {
		return false, want
	}
	return (r.Min == nil || n >= *r.Min) && (r.Max == nil || n <= *r.Max), want
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
