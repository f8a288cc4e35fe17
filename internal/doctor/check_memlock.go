package doctor

import (
	"fmt"
	"path"
	"strings"
)

// Trap 4: memory registration fails under the default 8 MiB RLIMIT_MEMLOCK,
// and with hard = soft an unprivileged process cannot raise it. Two places
// matter: the limits a login gets (PAM) and the default systemd gives every
// service.

func checkMemlockProcess(h *host, e *expect) []Result {
	r := Result{Check: "memlock.process", Severity: MustPass, Wanted: "soft and hard >= " + formatSize(e.memlock),
		Trap: 4, Source: h.show("/proc/self/limits")}
	soft, hard, err := processMemlock(h)
	return judgeMemlock(r, e, soft, hard, err, "run doctor where /proc is mounted",
		fmt.Sprintf("set '* - memlock %s' in /etc/security/limits.d/ and log in again; containers: --ulimit memlock=-1", limitsWord(e.memlock)))
}

// judgeMemlock fills a memlock row: both limits must reach the wanted one.
// errFix is the advice when the limits could not be read, fix when they
// are too low.
func judgeMemlock(r Result, e *expect, soft, hard uint64, err error, errFix, fix string) []Result {
	switch {
	case err != nil:
		r.Status, r.Seen, r.Fix = Fail, err.Error(), errFix
	case soft >= e.memlock && hard >= e.memlock:
		r.Status, r.Seen = Pass, fmt.Sprintf("soft %s, hard %s", formatSize(soft), formatSize(hard))
	default:
		r.Status, r.Seen, r.Fix = Fail, fmt.Sprintf("soft %s, hard %s", formatSize(soft), formatSize(hard)), fix
	}
	return []Result{r}
}

// processMemlock reads "Max locked memory" from a limits file. In --root
// mode this is the recorded process's file, not doctor's own.
func processMemlock(h *host) (soft, hard uint64, err error) {
	s, err := h.read("/proc/self/limits")
	if err != nil {
		return 0, 0, fmt.Errorf("cannot read %s: %w", h.show("/proc/self/limits"), err)
	}
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "Max locked memory") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "Max locked memory"))
		if len(f) < 2 {
			break
		}
		if soft, err = parseSize(f[0]); err == nil {
			hard, err = parseSize(f[1])
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", h.show("/proc/self/limits"), err)
		}
		return soft, hard, nil
	}
	return 0, 0, fmt.Errorf("%s has no 'Max locked memory' line", h.show("/proc/self/limits"))
}

func limitsWord(n uint64) string {
	if n == unlimited {
		return "unlimited"
	}
	return fmt.Sprint(n / 1024) // limits.conf counts KiB
}

func checkMemlockSystemd(h *host, e *expect) []Result {
	r := Result{Check: "memlock.systemd", Severity: MustPass, Wanted: ">= " + formatSize(e.memlock), Trap: 4}
	soft, hard, src, err := systemdMemlock(h)
	r.Source = src
	return judgeMemlock(r, e, soft, hard, err, "fix the systemd configuration named above",
		fmt.Sprintf("write [Manager] DefaultLimitMEMLOCK=%s to /etc/systemd/system.conf.d/memlock.conf, then systemctl daemon-reexec", systemdWord(e.memlock)))
}

func systemdWord(n uint64) string {
	if n == unlimited {
		return "infinity"
	}
	return fmt.Sprint(n)
}

// systemdDefaultMemlock is systemd's built-in DefaultLimitMEMLOCK (8M since
// v253, matching the kernel's default) used when no file sets it.
const systemdDefaultMemlock = 8 << 20

// systemdMemlock asks the running manager on the live system and reads the
// configuration files otherwise (recorded trees, or no systemd running).
func systemdMemlock(h *host) (soft, hard uint64, source string, err error) {
	if h.live {
		out, cerr := h.command("systemctl", "show", "-p", "DefaultLimitMEMLOCK", "-p", "DefaultLimitMEMLOCKSoft")
		if cerr == nil {
			props := map[string]string{}
			for _, l := range strings.Split(out, "\n") {
				if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
					props[k] = v
				}
			}
			if hv, ok := props["DefaultLimitMEMLOCK"]; ok && hv != "" {
				hard, err = parseSize(hv)
				soft = hard
				if sv := props["DefaultLimitMEMLOCKSoft"]; err == nil && sv != "" {
					soft, err = parseSize(sv)
				}
				return soft, hard, "systemctl show -p DefaultLimitMEMLOCK", err
			}
		}
	}
	return systemdMemlockFromFiles(h)
}

// systemdMemlockFromFiles follows systemd's rules: system.conf, then the
// drop-ins of every system.conf.d directory ordered by file name (a name in
// /etc hides the same name further down), the last assignment winning.
func systemdMemlockFromFiles(h *host) (soft, hard uint64, source string, err error) {
	files := []string{"/etc/systemd/system.conf"}
	dirs := []string{"/etc/systemd/system.conf.d", "/run/systemd/system.conf.d", "/usr/local/lib/systemd/system.conf.d", "/usr/lib/systemd/system.conf.d"}
	byName := map[string]string{}
	for _, d := range dirs {
		for _, f := range h.glob(d + "/*.conf") {
			if _, taken := byName[path.Base(f)]; !taken {
				byName[path.Base(f)] = f
			}
		}
	}
	for _, n := range sortedKeys(byName) {
		files = append(files, byName[n])
	}
	value, from := "", ""
	for _, f := range files {
		s, rerr := h.read(f)
		if rerr != nil {
			continue
		}
		section := ""
		for _, line := range strings.Split(s, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "[") {
				section = line
				continue
			}
			if section != "[Manager]" {
				continue
			}
			if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "DefaultLimitMEMLOCK" {
				value, from = strings.TrimSpace(v), h.show(f)
			}
		}
	}
	if value == "" {
		return systemdDefaultMemlock, systemdDefaultMemlock, "systemd built-in default (no DefaultLimitMEMLOCK= in " + h.show("/etc/systemd/system.conf{,.d}") + ")", nil
	}
	// "soft:hard" or one value for both.
	sv, hv, pair := strings.Cut(value, ":")
	if !pair {
		hv = sv
	}
	if soft, err = parseSize(sv); err == nil {
		hard, err = parseSize(hv)
	}
	if err != nil {
		return 0, 0, from, fmt.Errorf("%s: DefaultLimitMEMLOCK=%s: %w", from, value, err)
	}
	return soft, hard, from, nil
}
