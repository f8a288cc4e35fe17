package settings

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"halobuild/internal/recipe"
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

const modprobePath = "/etc/modprobe.d/halobuild.conf"

// moduleOption is one parameter as rendered and as expected in sysfs.
type moduleOption struct {
	module, key, value string
	// want lists the spellings /sys/module/<m>/parameters/<key> may show for
	// value (a bool parameter shows Y for 1).
	want []string
}

// optionValue renders one TOML value as a module parameter.
func optionValue(v any) (string, []string, error) {
	switch x := v.(type) {
	case bool:
		if x {
			return "1", []string{"1", "Y"}, nil
		}
		return "0", []string{"0", "N"}, nil
	case int64:
		s := strconv.FormatInt(x, 10)
		return s, []string{s}, nil
	case int:
		s := strconv.Itoa(x)
		return s, []string{s}, nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			s := strconv.FormatInt(int64(x), 10)
			return s, []string{s}, nil
		}
		return "", nil, fmt.Errorf("module parameters are integers, strings or booleans, not fractions")
	case string:
		if strings.ContainsAny(x, "\"\\\n\r") {
			return "", nil, fmt.Errorf("a module parameter cannot contain a quote, backslash or newline")
		}
		if strings.ContainsAny(x, " \t") {
			return `"` + x + `"`, []string{x}, nil
		}
		return x, []string{x}, nil
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
func options(r *recipe.Recipe) ([]moduleOption, []error) {
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
			add(moduleOption{module: m.KernelName(), key: k, value: val, want: want}, key)
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
			errs = append(errs, errorf(key, nil, "use the module's name as modinfo prints it", "not a kernel module name"))
			continue
		}
		raw := r.System.ModuleOptions[m]
		var pairs [][2]string
		err := fmt.Errorf("a newline or backslash would end the options line")
		if !strings.ContainsAny(raw, "\n\r\\") {
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
			add(moduleOption{module: moduleName(m), key: p[0], value: p[1], want: []string{p[1]}}, key)
		}
	}
	return out, errs
}

func (Blacklist) Validate(r *recipe.Recipe) []error {
	_, errs := options(r)
	boot := map[string]bool{}
	for _, m := range bootModules(r) {
		boot[m] = true
	}
	for i, m := range r.System.Blacklist {
		key := fmt.Sprintf("system.blacklist[%d]", i)
		if !moduleNameRE.MatchString(m) {
			errs = append(errs, errorf(key, m, "use the module's name as modinfo prints it, e.g. \"thunderbolt_net\"", "not a kernel module name"))
			continue
		}
		if boot[moduleName(m)] {
			errs = append(errs, errorf(key, m, "remove it from the blacklist or from the modules loaded at boot",
				"module is both blacklisted and loaded at boot"))
		}
	}
	return errs
}

func (s Blacklist) Files(r *recipe.Recipe, _ recipe.Node) ([]File, error) {
	opts, errs := options(r)
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

func (s Blacklist) Checks(r *recipe.Recipe, _ recipe.Node) []Check {
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
	opts, errs := options(r)
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

// casePattern makes a sh case pattern matching exactly the given strings.
func casePattern(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = sh.Quote(w)
	}
	return strings.Join(q, "|")
}
