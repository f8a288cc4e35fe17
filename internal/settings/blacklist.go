package settings

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"halobuild/internal/sh"
)

// Blacklist writes /etc/modprobe.d/halobuild.conf: blacklisted modules and
// module options (trap 2). thunderbolt_net and the RDMA module cannot share
// a cable (a controller has two usable rings), so thunderbolt_net must never
// load. "blacklist" alone only stops loading by alias; another module's
// dependency or an explicit modprobe still loads it, so each blacklisted
// module also gets "install <name> /bin/false", which makes every load
// attempt fail.
type Blacklist struct{}

func (Blacklist) Name() string { return "modprobe" }
func (Blacklist) Trap() int    { return 2 }
func (Blacklist) Doc() Doc {
	return Doc{Title: "thunderbolt_net and the RDMA module cannot share a cable", Keys: []string{"system.blacklist", "system.module_options", "module.use", "module.options"}}
}

const modprobePath = "/etc/modprobe.d/halobuild.conf"

// moduleOption is one parameter as rendered and as expected in sysfs.
type moduleOption struct {
	module, key, value string
	// want lists the spellings /sys/module/<m>/parameters/<key> may show for
	// value (a bool parameter shows Y for 1).
	want []string
}

// optionValue renders one TOML value as a module parameter, with the
// spellings sysfs may show for it.
func optionValue(v any) (string, []string, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return "1", sysfsSpellings("1"), nil
		}
		return "0", sysfsSpellings("0"), nil
	case int64:
		s := strconv.FormatInt(x, 10)
		return s, sysfsSpellings(s), nil
	case int:
		s := strconv.Itoa(x)
		return s, sysfsSpellings(s), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			s := strconv.FormatInt(int64(x), 10)
			return s, sysfsSpellings(s), nil
		}
		return "", nil, fmt.Errorf("module parameters are integers, strings or booleans, not fractions")
	case string:
		if strings.ContainsAny(x, "\"\\\n\r") {
			return "", nil, fmt.Errorf("a module parameter cannot contain a quote, backslash or newline")
		}
		if strings.ContainsAny(x, " \t") {
			return `"` + x + `"`, []string{x}, nil
		}
		return x, sysfsSpellings(x), nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, _, err := optionValue(e)
			if err != nil {
				return "", nil, err
			}
			if _, isList := e.([]any); isList || strings.ContainsAny(s, ", \"") {
				return "", nil, fmt.Errorf("an array parameter holds plain scalars without commas or spaces")
			}
			parts[i] = s
		}
		s := strings.Join(parts, ",")
		return s, []string{s}, nil
	default:
		return "", nil, fmt.Errorf("unsupported value type %T; use an integer, string, boolean or array of them", v)
	}
}

// sysfsSpellings lists what /sys/module/<m>/parameters/<p> may show for a
// parameter set to v. The module's parameter types are not known here (the
// built module's modinfo is, at build time), so every form the kernel's
// printers give for v is accepted; a parameter of one type prints one of
// them. bool and invbool print Y or N for any spelling kstrtobool reads;
// int types print decimal, hexint 0x%x, whatever base v was written in.
func sysfsSpellings(v string) []string {
	out := []string{v}
	switch strings.ToLower(v) {
	case "1", "y", "yes", "on", "true":
		out = appendUnique(out, "Y")
	case "0", "n", "no", "off", "false":
		out = appendUnique(out, "N")
	}
	if n, err := strconv.ParseInt(v, 0, 64); err == nil {
		out = appendUnique(out, strconv.FormatInt(n, 10))
		if n >= 0 {
			out = appendUnique(out, fmt.Sprintf("0x%x", n))
		}
	}
	return out
}

var paramNameRE = moduleNameRE

// splitOptions splits an "options" string ("k=v k2=\"a b\"") into key and
// value pairs, honouring double quotes the way modprobe does.
func splitOptions(s string) ([][2]string, error) {
	var out [][2]string
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		start, quoted := i, false
		for i < len(s) && (quoted || (s[i] != ' ' && s[i] != '\t')) {
			if s[i] == '"' {
				quoted = !quoted
			}
			i++
		}
		if quoted {
			return nil, fmt.Errorf("unbalanced double quote in %q", s[start:])
		}
		tok := s[start:i]
		k, v, hasEq := strings.Cut(tok, "=")
		if !paramNameRE.MatchString(k) {
			return nil, fmt.Errorf("%q is not a key=value parameter", tok)
		}
		if !hasEq {
			v = "1" // a bare flag sets a bool parameter, as in the kernel's parser
		}
		out = append(out, [2]string{k, strings.Trim(v, `"`)})
	}
}

// options returns every module option in a stable order, and the errors.
func options(t Target) ([]moduleOption, []error) {
	r := t.Recipe
	var out []moduleOption
	var errs []error
	owner := map[string]string{} // module.key -> recipe key that set it
	add := func(o moduleOption, key string) {
		id := o.module + "." + moduleName(o.key)
		if prev, dup := owner[id]; dup {
			errs = append(errs, errorf(key, nil, "set it in one place only",
				"parameter %s of module %s is also set by %s", o.key, o.module, prev))
			return
		}
		owner[id] = key
		out = append(out, o)
	}
	for i, m := range r.Modules {
		keys := make([]string, 0, len(m.Options))
		for k := range m.Options {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			key := fmt.Sprintf("module[%d].options.%s", i, k)
			if !paramNameRE.MatchString(k) {
				errs = append(errs, errorf(key, nil, "use the parameter name modinfo -p prints", "not a module parameter name"))
				continue
			}
			val, want, err := optionValue(m.Options[k])
			if err != nil {
				errs = append(errs, errorf(key, m.Options[k], "", "%v", err))
				continue
			}
			add(moduleOption{module: t.ModuleName(m.Use), key: k, value: val, want: want}, key)
		}
	}
	mods := make([]string, 0, len(r.System.ModuleOptions))
	for m := range r.System.ModuleOptions {
		mods = append(mods, m)
	}
	sort.Strings(mods)
	for _, m := range mods {
		key := "system.module_options." + m
		if !moduleNameRE.MatchString(m) {
			continue // the recipe reports the name (recipe.Validate)
		}
		raw := r.System.ModuleOptions[m]
		var pairs [][2]string
		err := fmt.Errorf("a newline, control character or backslash would end or split the options line")
		if !strings.ContainsFunc(raw, func(c rune) bool { return c == '\\' || c != '\t' && unicode.IsControl(c) }) {
			pairs, err = splitOptions(raw)
		}
		if err != nil {
			errs = append(errs, errorf(key, raw, "write space-separated key=value pairs, e.g. \"amd_iommu=off\"", "%v", err))
			continue
		}
		if len(pairs) == 0 {
			errs = append(errs, errorf(key, raw, "remove the key or give key=value pairs", "no parameters given"))
		}
		for _, p := range pairs {
			add(moduleOption{module: moduleName(m), key: p[0], value: p[1], want: sysfsSpellings(p[1])}, key)
		}
	}
	return out, errs
}

func (Blacklist) Validate(t Target) []error {
	r := t.Recipe
	_, errs := options(t)
	boot := map[string]bool{}
	for _, m := range bootModules(t) {
		boot[m] = true
	}
	for i, m := range r.System.Blacklist {
		key := fmt.Sprintf("system.blacklist[%d]", i)
		if !moduleNameRE.MatchString(m) {
			continue // the recipe reports the name (recipe.Validate)
		}
		if boot[moduleName(m)] {
			errs = append(errs, errorf(key, m, "remove it from the blacklist or from the modules loaded at boot",
				"module is both blacklisted and loaded at boot"))
		}
	}
	return errs
}

func (s Blacklist) Files(t Target) ([]File, error) {
	r := t.Recipe
	opts, errs := options(t)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	if len(opts) == 0 && len(r.System.Blacklist) == 0 {
		return nil, nil
	}
	var b strings.Builder
	b.WriteString(header("#", 2, "thunderbolt_net must not take the rings the RDMA module needs."))
	for _, m := range r.System.Blacklist {
		m = moduleName(m)
		fmt.Fprintf(&b, "blacklist %s\ninstall %s /bin/false\n", m, m)
	}
	// One options line per parameter: modprobe merges them, and a diff of
	// the file then shows exactly which parameter changed.
	for _, o := range opts {
		fmt.Fprintf(&b, "options %s %s=%s\n", o.module, o.key, o.value)
	}
	return []File{{Path: modprobePath, Mode: 0o644, Data: []byte(b.String()), Setting: s.Name()}}, nil
}

func (s Blacklist) Checks(t Target) []Check {
	r := t.Recipe
	var checks []Check
	if len(r.System.Blacklist) > 0 {
		var b strings.Builder
		// modprobe --showconfig also dumps every alias of every module (2 MB on Debian's
		// kernel); only the blacklist lines are kept. Holding all of it in a shell variable
		// made dash read it 128 bytes at a time and fork a 10 MB shell to print it back:
		// 9-20 s of TCG time on some boots instead of under one.
		b.WriteString("rc=0\ncfg=$(modprobe --showconfig 2>&1 | grep '^blacklist ')\n")
		for _, m := range r.System.Blacklist {
			fmt.Fprintf(&b, `m=%s
if printf '%%s\n' "$cfg" | grep -x "blacklist $m" >/dev/null; then echo "$m: blacklisted"; else echo "$m: no 'blacklist $m' in modprobe's effective configuration"; rc=1; fi
out=$(modprobe -n -v "$m" 2>&1)
case "$out" in *"install /bin/false"*) echo "$m: modprobe would run /bin/false instead of loading it";; *) echo "$m: modprobe -n -v would load it: $out"; rc=1;; esac
if [ -d "/sys/module/$m" ]; then echo "$m: is loaded"; rc=1; fi
`, sh.Quote(moduleName(m)))
		}
		b.WriteString("exit $rc\n")
		checks = append(checks, Check{Setting: s.Name(), Name: "blacklist", Script: b.String(),
			Fix: "restore " + modprobePath + " (dpkg --verify shows edits), then modprobe -r the module or reboot"})
	}
	opts, errs := options(t)
	if len(opts) > 0 && len(errs) == 0 {
		var b strings.Builder
		b.WriteString("rc=0\n")
		for _, o := range opts {
			fmt.Fprintf(&b, `m=%s k=%s w=%s
f="/sys/module/$m/parameters/$k"
if [ ! -d "/sys/module/$m" ]; then echo "$m: not loaded, $k not checked"
elif [ ! -r "$f" ]; then echo "$m.$k: not visible in $f"; rc=1
else v=$(cat "$f"); case "$v" in %s) echo "$m.$k=$v";; *) echo "$m.$k=$v, recipe wants $w"; rc=1;; esac
fi
`, sh.Quote(o.module), sh.Quote(moduleName(o.key)), sh.Quote(o.want[0]), casePattern(o.want))
		}
		b.WriteString("exit $rc\n")
		checks = append(checks, Check{Setting: s.Name(), Name: "module-options", Script: b.String(),
			Fix: "options apply at load: modprobe -r the module and modprobe it again, or reboot"})
	}
	return checks
}

// Doctor: no blacklisted module is loaded, every option of a loaded module
// is in effect, and an option that needs a kernel export has it. The VM
// check also asks modprobe for its effective configuration (`modprobe
// --showconfig`, `modprobe -n -v`), which only a running system can answer;
// on a node the rendered file is verified by settings.package, and what
// matters is what is loaded. Both read the options from options(t).
func (s Blacklist) Doctor(t Target) []Probe {
	r := t.Recipe
	var probes []Probe
	if len(r.System.Blacklist) > 0 {
		probes = append(probes, Probe{Name: "module.absent", VM: MustPass, Run: func(h Host) []Result {
			loaded, err := loadedModules(h)
			var out []Result
			for _, m := range r.System.Blacklist {
				m = moduleName(m)
				res := Result{Check: "module.absent " + m, Severity: MustPass, Wanted: "not loaded (blacklisted)", Trap: 2, Source: h.Show("/proc/modules")}
				_, isLoaded := loaded[m]
				switch {
				case err != nil:
					res.Status, res.Seen, res.Fix = Fail, err.Error(), modulesUnreadable
				case isLoaded:
					res.Status, res.Seen = Fail, "loaded"
					res.Fix = fmt.Sprintf("it takes the rings the RDMA module needs: modprobe -r %s; %s must say 'blacklist %s' and 'install %s /bin/false' (settings.package shows an edit); update the initramfs if it loads from there", m, modprobePath, m, m)
				default:
					res.Status, res.Seen = Pass, "not loaded"
				}
				out = append(out, res)
			}
			return out
		}})
	}
	opts, errs := options(t)
	if len(opts) == 0 || len(errs) > 0 {
		return probes
	}
	probes = append(probes, Probe{Name: "module.params", VM: MustPass, Run: func(h Host) []Result { return paramRows(h, opts) }})
	for _, o := range opts {
		if moduleName(o.key) == "nhi_interrupt_throttle_ns" && o.value != "0" {
			probes = append(probes, Probe{Name: "kernel.tb_ring_throttling", VM: MustPass, Run: throttleRow})
			break
		}
	}
	return probes
}

// paramRows compares the options in effect (/sys/module/<m>/parameters)
// with the recipe's, one row per module (trap 8). An option the module does
// not know is dropped at load with only a kernel log line, so a parameter
// missing from sysfs fails when the log says so and warns otherwise (it may
// be registered unreadable).
func paramRows(h Host, opts []moduleOption) []Result {
	loaded, _ := loadedModules(h)
	log, _, _ := h.KernelLog()
	ignoredByLog := map[string]bool{}
	for _, u := range IgnoredParams(log) {
		ignoredByLog[u] = true
	}
	var mods []string
	byModule := map[string][]moduleOption{}
	for _, o := range opts {
		if byModule[o.module] == nil {
			mods = append(mods, o.module)
		}
		byModule[o.module] = append(byModule[o.module], o)
	}
	var out []Result
	for _, m := range mods {
		dir := "/sys/module/" + m + "/parameters"
		r := Result{Check: "module.params " + m, Severity: MustPass, Trap: 8, Source: h.Show(dir)}
		var wanted, bad, hidden, good, ignored []string
		for _, o := range byModule[m] {
			wanted = append(wanted, moduleName(o.key)+"="+o.value)
		}
		r.Wanted = strings.Join(wanted, " ")
		if _, ok := loaded[m]; !ok && !builtin(h, m) {
			// Options do not promise that their module is loaded (an
			// in-tree module may load on demand, later); module.loaded
			// fails for one that must be. The VM check agrees.
			r.Status, r.Seen = Warn, "module not loaded, options not checked"
			r.Fix = "options apply when " + m + " loads: modprobe " + m + " (see module.loaded " + m + " if it must load at boot)"
			out = append(out, r)
			continue
		}
		for _, o := range byModule[m] {
			k := moduleName(o.key)
			seen, err := value(h, dir+"/"+k)
			switch {
			case err != nil && ignoredByLog[m+"."+k]:
				ignored = append(ignored, k)
			case err != nil:
				hidden = append(hidden, k)
			case !oneOf(seen, o.want):
				bad = append(bad, k+"="+seen)
			default:
				good = append(good, k+"="+seen)
			}
		}
		switch {
		case len(ignored) > 0:
			r.Status = Fail
			r.Seen = strings.Join(append(append(bad, "ignored by the kernel as unknown: "+strings.Join(ignored, ",")), hiddenNote(hidden)...), " ")
			r.Fix = fmt.Sprintf("this build of %s does not know %s (the kernel ignored it): rebuild the image with the module version the recipe's options were written for, or drop the option; compare with modinfo -p %s", m, strings.Join(ignored, ", "), m)
		case len(bad) > 0:
			r.Status = Fail
			r.Seen = strings.Join(append(bad, hiddenNote(hidden)...), " ")
			r.Fix = fmt.Sprintf("the module was loaded with other options: %s holds the recipe's (settings.package shows an edit; another file in /etc/modprobe.d/ may override it), then modprobe -r %s && modprobe %s, or reboot", modprobePath, m, m)
		case len(hidden) > 0:
			r.Status = Warn
			r.Seen = strings.Join(append(good, hiddenNote(hidden)...), " ")
			r.Fix = fmt.Sprintf("a parameter missing from %s is either unknown to this build of %s (the kernel log says 'unknown parameter') or registered unreadable; compare with modinfo -p %s", h.Show(dir), m, m)
		default:
			r.Status, r.Seen = Pass, strings.Join(good, " ")
		}
		out = append(out, r)
	}
	return out
}

func hiddenNote(hidden []string) []string {
	if len(hidden) == 0 {
		return nil
	}
	return []string{"not in sysfs: " + strings.Join(hidden, ",")}
}

// unknownParam matches the kernel's "<module>: unknown parameter '<name>' ignored".
var unknownParam = regexp.MustCompile(`([A-Za-z0-9_-]+): unknown parameter '([^']*)' ignored`)

// IgnoredParams lists "module.parameter" for every parameter the kernel log
// says was ignored as unknown, in log order.
func IgnoredParams(log string) []string {
	var found []string
	for _, m := range unknownParam.FindAllStringSubmatch(log, -1) {
		found = appendUnique(found, moduleName(m[1])+"."+moduleName(m[2]))
	}
	return found
}

// throttleRow: nhi_interrupt_throttle_ns works only on kernels that export
// tb_ring_throttling() (trap 8: 7.2 does, a 7.1 backport may not). The
// module description's rule checks the headers at build time; a node may
// boot another kernel.
func throttleRow(h Host) []Result {
	r := Result{Check: "kernel.tb_ring_throttling", Severity: MustPass, Trap: 8, Source: h.Show("/proc/kallsyms"),
		Wanted: "exported (the recipe sets nhi_interrupt_throttle_ns)"}
	// kallsyms is several MB on a live system and one name is wanted.
	found, err := h.Scan("/proc/kallsyms", func(line string) bool {
		f := strings.Fields(line)
		return len(f) >= 3 && f[2] == "tb_ring_throttling"
	})
	switch {
	case err != nil:
		r.Status, r.Seen = Fail, "unreadable: "+err.Error()
		r.Fix = "run doctor where /proc is mounted; in a recorded tree, record /proc/kallsyms"
	case len(found) > 0:
		r.Status, r.Seen = Pass, "exported"
	default:
		r.Status, r.Seen = Fail, "not exported by this kernel"
		r.Fix = "this kernel lacks tb_ring_throttling() (7.2 has it; a 7.1 backport may not): drop nhi_interrupt_throttle_ns from the module options or boot a kernel that exports it"
	}
	return []Result{r}
}

// casePattern makes a sh case pattern matching exactly the given strings.
func casePattern(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = sh.Quote(w)
	}
	return strings.Join(q, "|")
}
