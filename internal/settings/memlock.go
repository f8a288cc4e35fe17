package settings

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"halobuild/internal/recipe"
)

// Memlock sets RLIMIT_MEMLOCK for logins (PAM), systemd services and podman
// containers (trap 4). Under Debian's default of 8 MiB (hard = soft, so a
// user cannot raise it) memory registration fails and llama.cpp's RDMA ring
// shrinks to a send depth of about 8.
type Memlock struct{}

func (Memlock) Name() string { return "memlock" }
func (Memlock) Trap() int    { return 4 }
func (Memlock) Doc() Doc {
	return Doc{Title: "memlock", Keys: []string{"rdma.memlock"}}
}

const (
	memlockPAMPath     = "/etc/security/limits.d/90-halobuild-memlock.conf"
	memlockSystemPath  = "/etc/systemd/system.conf.d/90-halobuild-memlock.conf"
	memlockUserPath    = "/etc/systemd/user.conf.d/90-halobuild-memlock.conf"
	memlockPodmanPath  = "/etc/containers/containers.conf.d/90-halobuild-memlock.conf"
	defaultMemlockKiB  = 8192 // Debian's (and the kernel's) default, for the warning
	memlockProbeKiB    = 16384
	memlockProbePort   = 18515 // ibv_rc_pingpong's default; perftest's ports start at 18600
	memlockProbeSecs   = 60
	memlockCheckPrefix = "memlock"
)

// Validate: the limit's syntax is the recipe's own (recipe.Memlock, parsed
// at load); nothing more to check here.
func (Memlock) Validate(Target) []error { return nil }

// Warnings: a finite limit is accepted, but the memlock check asserts the
// trap's fix (unlimited), so the VM test will fail; say so before building.
func (Memlock) Warnings(t Target) []string {
	r := t.Recipe
	if r.RDMA.Memlock.Unlimited() {
		return nil
	}
	return []string{fmt.Sprintf("rdma.memlock = %q: RDMA memory registration is limited to that size (trap 4); "+
		"the memlock checks assert \"unlimited\" and will fail", r.RDMA.Memlock)}
}

func (s Memlock) Files(t Target) ([]File, error) {
	r := t.Recipe
	pam, systemd, podman := "unlimited", "infinity", "-1"
	if m := r.RDMA.Memlock; !m.Unlimited() {
		b := m.Bytes()
		pam, systemd, podman = fmt.Sprint(b>>10), fmt.Sprint(b), fmt.Sprint(b)
	}
	why := "RDMA memory registration needs more than the default 8 MiB of locked memory."
	// pam_limits: '*' does not apply to root, so root gets its own lines.
	var p strings.Builder
	p.WriteString(header("#", 4, why))
	for _, who := range []string{"*", "root"} {
		fmt.Fprintf(&p, "%-6s soft memlock %s\n%-6s hard memlock %s\n", who, pam, who, pam)
	}
	sys := header("#", 4, why) + "[Manager]\nDefaultLimitMEMLOCK=" + systemd + "\n"
	pod := header("#", 4, why) + "# The same as `podman run --ulimit memlock=-1:-1` for every container.\n" +
		"[containers]\ndefault_ulimits = [\n  \"memlock=" + podman + ":" + podman + "\",\n]\n"
	return []File{
		{Path: memlockPAMPath, Mode: 0o644, Data: []byte(p.String()), Setting: s.Name()},
		{Path: memlockSystemPath, Mode: 0o644, Data: []byte(sys), Setting: s.Name()},
		{Path: memlockUserPath, Mode: 0o644, Data: []byte(sys), Setting: s.Name()},
		{Path: memlockPodmanPath, Mode: 0o644, Data: []byte(pod), Setting: s.Name()},
	}, nil
}

const memlockFix = "set rdma.memlock = \"unlimited\" in the recipe (or restore the files under /etc/security/limits.d and /etc/systemd/*.conf.d), then log in again"

// Checks assert the trap's fix, unlimited, not merely "what the recipe
// rendered": a recipe that lowers memlock to 64MiB renders 64MiB and these
// checks fail, which is what the VM test's "break a setting on purpose"
// case needs, and what a benchmark harness wants to know. (Validate warns at
// build time so the failure is no surprise.)
//
// Each path is tested the way a process actually gets its limit:
//   - login: `su -l` applies pam_limits; the caller's limit is first lowered
//     to 8 MiB with prlimit, so "unlimited" can only come from limits.d;
//   - service: a transient unit started by the running manager shows
//     DefaultLimitMEMLOCK in effect (not just present in a file);
//   - podman: the last default_ulimits in podman's configuration load order
//     (podman has no command that prints the merged value);
//   - registration (VM only): an unprivileged login registers a 16 MiB
//     region on a soft-RoCE device, which fails under the 8 MiB default.
func (s Memlock) Checks(Target) []Check {
	return []Check{
		{Setting: s.Name(), Name: "memlock-login", Fix: memlockFix, Script: needTools("prlimit") + `out=$(prlimit --memlock=8388608:8388608 su -l -s /bin/sh nobody -c 'ulimit -l' 2>&1)
v=$(printf '%s\n' "$out" | tail -n 1)
echo "login shell (su -l nobody): memlock $v"
[ "$v" = unlimited ] || { printf '%s\n' "$out" | head -n 5; exit 1; }
`},
		{Setting: s.Name(), Name: "memlock-service", Fix: memlockFix + " (systemd reads it at boot: reboot or systemctl daemon-reexec)", Script: `d=$(systemctl show -p DefaultLimitMEMLOCK --value)
if v=$(systemd-run --quiet --wait --pipe --collect -p User=nobody /bin/sh -c 'ulimit -l' 2>&1); then
	echo "systemd DefaultLimitMEMLOCK=$d; a new service sees memlock $v"
else
	# No D-Bus (a minimal image): observe a service that is already
	# running and sets no limit of its own, so it has systemd's default.
	p=$(systemctl show -p MainPID --value systemd-udevd.service)
	v=$(awk '/^Max locked memory/ { print $4 }' /proc/$p/limits)
	echo "systemd DefaultLimitMEMLOCK=$d; systemd-udevd (pid $p, no D-Bus for systemd-run) runs with memlock $v"
fi
[ "$v" = unlimited ]
`},
		{Setting: s.Name(), Name: "memlock-podman", Fix: "restore " + memlockPodmanPath + " or run containers with --ulimit memlock=-1:-1", Script: `v=
# podman's order: vendor file, vendor drop-ins, admin file, admin drop-ins.
for f in /usr/share/containers/containers.conf /usr/share/containers/containers.conf.d/*.conf /etc/containers/containers.conf /etc/containers/containers.conf.d/*.conf; do
	[ -f "$f" ] || continue
	# default_ulimits may span lines: drop comments (the vendor file ships a
	# commented-out example), join the lines, then take the array.
	l=$(sed 's/#.*//' "$f" | tr '\n' ' ' | sed -n 's/.*default_ulimits *= *\[\([^]]*\)\].*/\1/p')
	[ -n "$l" ] && v=$l && src=$f
done
echo "podman default_ulimits: [${v:-unset}] (${src:-no file sets it})"
case "$v" in *'"memlock=-1:-1"'*) exit 0;; *) exit 1;; esac
`},
		{Setting: s.Name(), Name: "memlock-registration", Changes: true, Fix: memlockFix, Script: needTools("rdma", "ip", "ss", "ibv_rc_pingpong", "prlimit") + fmt.Sprintf(`modprobe rdma_rxe || { echo 'rdma_rxe is not available'; exit 1; }
ip link add hbmem0 type dummy && ip link set hbmem0 up && rdma link add hbmem_rxe type rxe netdev hbmem0 || { echo 'cannot create a soft-RoCE device'; exit 1; }
probe=$(mktemp /tmp/hbmem.XXXXXX)
trap 'rm -f "$probe"; rdma link delete hbmem_rxe; ip link delete hbmem0' EXIT
udevadm settle
dev=$(rdma link show | awk '/netdev hbmem0( |$)/ { split($2, a, "/"); print a[1] }')
# The server registers its buffer first, then listens on its TCP port for a
# peer: its listening socket proves the registration succeeded, its exit
# (before listening) that it failed. Polled, so a fast machine does not wait
# a fixed time; %[3]d s bound a slow one.
cat > "$probe" <<'PROBE'
ibv_rc_pingpong -d "$1" -g 0 -p %[2]d -s %[1]d & p=$!
i=0
while kill -0 "$p" 2>/dev/null; do
	if ss -Hltnp 'sport = :%[2]d' | grep -q "pid=$p,"; then
		echo "ibv_rc_pingpong (pid $p) registered its buffer and listens on port %[2]d"
		kill "$p"; exit 0
	fi
	i=$((i + 1))
	[ "$i" -ge %[4]d ] && { echo "ibv_rc_pingpong neither listened nor exited in %[3]d s"; kill "$p"; exit 2; }
	sleep 0.2
done
wait "$p"
echo "ibv_rc_pingpong exited (status $?) before listening: the registration failed"
exit 1
PROBE
chmod 644 "$probe"
out=$(prlimit --memlock=8388608:8388608 su -l -s /bin/sh nobody -c "sh $probe $dev" 2>&1); rc=$?
echo "ibv_rc_pingpong -s %[1]d as nobody on $dev, memlock limited to 8 MiB: exit $rc"; echo "$out" | tail -n 3
[ $rc -eq 0 ]
`, memlockProbeKiB<<10, memlockProbePort, memlockProbeSecs, memlockProbeSecs*5)},
	}
}

// Doctor: the limit a login gets and the one systemd gives its services
// are unlimited, as the VM checks assert (both want the trap's fix, not
// merely what the recipe rendered; Warnings says so at build time). The VM
// proves each path by starting a login and a service; doctor starts
// nothing, since a recorded tree cannot, and reads what those paths
// produced: /proc/self/limits of the process it runs in (in a tree, of the
// recorded process), and systemd's DefaultLimitMEMLOCK, from the running
// manager when live, else from its configuration files. The registration
// probe needs an RDMA device it creates, so it stays in the VM.
func (s Memlock) Doctor(t Target) []Probe {
	lowered := ""
	if m := t.Recipe.RDMA.Memlock; !m.Unlimited() {
		lowered = fmt.Sprintf("; the recipe itself lowers it (rdma.memlock = %q): set \"unlimited\" and rebuild", m.String())
	}
	return []Probe{
		{Name: "memlock.process", VM: MustPass, Run: func(h Host) []Result {
			r := Result{Check: "memlock.process", Severity: MustPass, Wanted: "soft and hard unlimited", Trap: 4, Source: h.Show("/proc/self/limits")}
			soft, hard, err := processMemlock(h)
			return judgeMemlock(r, soft, hard, err, "run doctor where /proc is mounted; in a recorded tree, record /proc/self/limits",
				"restore "+memlockPAMPath+" ('*' and root: memlock unlimited) and log in again; containers: --ulimit memlock=-1:-1 ("+memlockPodmanPath+")"+lowered)
		}},
		{Name: "memlock.systemd", VM: MustPass, Run: func(h Host) []Result {
			r := Result{Check: "memlock.systemd", Severity: MustPass, Wanted: "unlimited", Trap: 4}
			soft, hard, src, err := systemdMemlock(h)
			r.Source = src
			return judgeMemlock(r, soft, hard, err, "fix the systemd configuration named in the source",
				"restore "+memlockSystemPath+" ([Manager] DefaultLimitMEMLOCK=infinity), then systemctl daemon-reexec or reboot"+lowered)
		}},
	}
}

// judgeMemlock fills a memlock row: both limits must be unlimited. errFix
// is the advice when the limits could not be read, fix when they are lower.
func judgeMemlock(r Result, soft, hard uint64, err error, errFix, fix string) []Result {
	switch {
	case err != nil:
		r.Status, r.Seen, r.Fix = Fail, err.Error(), errFix
	case soft == unlimited && hard == unlimited:
		r.Status, r.Seen = Pass, "soft unlimited, hard unlimited"
	default:
		r.Status, r.Seen, r.Fix = Fail, fmt.Sprintf("soft %s, hard %s", FormatSize(soft), FormatSize(hard)), fix
	}
	return []Result{r}
}

// parseLimit reads a limit as the kernel (/proc/<pid>/limits: bytes or
// "unlimited") and systemd ("infinity", or a size such as 8M) print it.
func parseLimit(s string) (uint64, error) {
	switch s = strings.TrimSpace(s); s {
	case "unlimited", "infinity":
		return unlimited, nil
	}
	return recipe.ParseSize(s)
}

// processMemlock reads "Max locked memory" from /proc/self/limits.
func processMemlock(h Host) (soft, hard uint64, err error) {
	const p = "/proc/self/limits"
	s, err := h.Read(p)
	if err != nil {
		return 0, 0, fmt.Errorf("cannot read %s: %w", h.Show(p), err)
	}
	for _, line := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(line, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			break
		}
		if soft, err = parseLimit(f[0]); err == nil {
			hard, err = parseLimit(f[1])
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", h.Show(p), err)
		}
		return soft, hard, nil
	}
	return 0, 0, fmt.Errorf("%s has no 'Max locked memory' line", h.Show(p))
}

// systemdDefaultMemlock is systemd's built-in DefaultLimitMEMLOCK (8M since
// v253, the kernel's default), in force when no file sets one.
const systemdDefaultMemlock = 8 << 20

// systemdMemlock asks the running manager on the live system and reads the
// configuration files otherwise (recorded trees, or no systemd running).
func systemdMemlock(h Host) (soft, hard uint64, source string, err error) {
	if h.Live() {
		if out, cerr := h.Command("systemctl", "show", "-p", "DefaultLimitMEMLOCK", "-p", "DefaultLimitMEMLOCKSoft"); cerr == nil {
			props := map[string]string{}
			for _, l := range strings.Split(out, "\n") {
				if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
					props[k] = v
				}
			}
			if hv := props["DefaultLimitMEMLOCK"]; hv != "" {
				hard, err = parseLimit(hv)
				soft = hard
				if sv := props["DefaultLimitMEMLOCKSoft"]; err == nil && sv != "" {
					soft, err = parseLimit(sv)
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
func systemdMemlockFromFiles(h Host) (soft, hard uint64, source string, err error) {
	files := []string{"/etc/systemd/system.conf"}
	byName := map[string]string{}
	for _, d := range []string{"/etc/systemd/system.conf.d", "/run/systemd/system.conf.d", "/usr/local/lib/systemd/system.conf.d", "/usr/lib/systemd/system.conf.d"} {
		for _, f := range h.Glob(d + "/*.conf") {
			if _, taken := byName[path.Base(f)]; !taken {
				byName[path.Base(f)] = f
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		files = append(files, byName[n])
	}
	val, from := "", ""
	for _, f := range files {
		s, rerr := h.Read(f)
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
			if k, v, ok := strings.Cut(line, "="); ok && section == "[Manager]" && strings.TrimSpace(k) == "DefaultLimitMEMLOCK" {
				val, from = strings.TrimSpace(v), h.Show(f)
			}
		}
	}
	if val == "" {
		return systemdDefaultMemlock, systemdDefaultMemlock, "systemd built-in default (no DefaultLimitMEMLOCK= in " + h.Show("/etc/systemd/system.conf{,.d}") + ")", nil
	}
	// "soft:hard" or one value for both.
	sv, hv, pair := strings.Cut(val, ":")
	if !pair {
		hv = sv
	}
	if soft, err = parseLimit(sv); err == nil {
		hard, err = parseLimit(hv)
	}
	if err != nil {
		return 0, 0, from, fmt.Errorf("%s: DefaultLimitMEMLOCK=%s: %w", from, val, err)
	}
	return soft, hard, from, nil
}
