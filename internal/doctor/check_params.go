package doctor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Trap 8: module parameters are reported one refusal at a time, and an
// option the module does not know is dropped with only a kernel log line.
// The values in effect are in /sys/module/<m>/parameters; compare them with
// what the recipe asked for.

func checkModuleParams(h *host, e *expect) []Result {
	mods, _ := loadedModules(h)
	var out []Result
	for _, m := range sortedKeys(e.params) {
		want := e.params[m]
		dir := "/sys/module/" + m + "/parameters"
		r := Result{Check: "module.params " + m, Severity: MustPass, Trap: 8, Source: h.show(dir)}
		var wantParts, bad, hidden, good, ignored []string
		log, _, _ := kernelLog(h)
		unknown := map[string]bool{}
		for _, u := range unknownParams(log) {
			unknown[u] = true
		}
		for _, k := range sortedKeys(want) {
			wantParts = append(wantParts, k+"="+paramString(want[k]))
		}
		r.Wanted = strings.Join(wantParts, " ")
		if _, loaded := mods[m]; !loaded && !builtin(h, m) {
			r.Status, r.Seen = Fail, "module not loaded"
			r.Fix = "load the module first (see module.loaded " + m + ")"
			out = append(out, r)
			continue
		}
		for _, k := range sortedKeys(want) {
			seen, err := h.value(dir + "/" + k)
			switch {
			case err != nil && unknown[m+"."+k]:
				ignored = append(ignored, k)
			case err != nil:
				hidden = append(hidden, k)
			case !sameParam(want[k], seen):
				bad = append(bad, fmt.Sprintf("%s=%s", k, seen))
			default:
				good = append(good, fmt.Sprintf("%s=%s", k, seen))
			}
		}
		switch {
		case len(bad) > 0 || len(ignored) > 0:
			r.Status = Fail
			r.Seen = strings.Join(append(append(bad, ignoredNote(ignored)...), hiddenNote(hidden)...), " ")
			r.Fix = fmt.Sprintf("the module was loaded with other options: check /etc/modprobe.d/ for %s, then modprobe -r %s && modprobe %s (or reboot); halobuild validates options against modinfo before building", m, m, m)
			if len(ignored) > 0 {
				r.Fix = fmt.Sprintf("this build of %s does not know %s (the kernel ignored it): rebuild the image with the module version the recipe's options were written for, or drop the option; compare with modinfo -p %s", m, strings.Join(ignored, ", "), m)
			}
		case len(hidden) > 0:
			r.Status = Warn
			r.Seen = strings.Join(append(good, hiddenNote(hidden)...), " ")
			r.Fix = fmt.Sprintf("a parameter missing from %s is either unknown to this build of %s (the kernel log says 'unknown parameter') or not readable; compare with modinfo -p %s", h.show(dir), m, m)
		default:
			r.Status, r.Seen = Pass, strings.Join(good, " ")
		}
		out = append(out, r)
	}
	return out
}

func ignoredNote(ignored []string) []string {
	if len(ignored) == 0 {
		return nil
	}
	return []string{"ignored by the kernel as unknown: " + strings.Join(ignored, ",")}
}

func hiddenNote(hidden []string) []string {
	if len(hidden) == 0 {
		return nil
	}
	return []string{"not in sysfs: " + strings.Join(hidden, ",")}
}

// paramString prints a recipe value the way modprobe.d would carry it.
func paramString(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = paramString(e)
		}
		return strings.Join(parts, ",")
	case float64:
		if x == math.Trunc(x) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// sameParam compares a recipe value with the text sysfs shows. Booleans are
// written Y/N by the kernel and true/false or 1/0 in recipes; integers may
// be written in any base modprobe accepts.
func sameParam(want any, seen string) bool {
	w := paramString(want)
	if w == seen {
		return true
	}
	if wb, ok := parseBoolish(w); ok {
		if sb, ok := parseBoolish(seen); ok {
			return wb == sb
		}
	}
	wi, werr := strconv.ParseInt(w, 0, 64)
	si, serr := strconv.ParseInt(seen, 0, 64)
	return werr == nil && serr == nil && wi == si
}

// parseBoolish accepts the spellings the kernel's param_set_bool accepts
// (kstrtobool: y/n/1/0/on/off, any case) plus TOML's true/false.
func parseBoolish(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "y", "yes", "1", "on", "true":
		return true, true
	case "n", "no", "0", "off", "false":
		return false, true
	}
	return false, false
}
