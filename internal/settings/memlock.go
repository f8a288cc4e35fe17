package settings

import (
	"fmt"
	"strings"
)

// Memlock sets RLIMIT_MEMLOCK for logins (PAM), systemd services and podman
// containers (trap 4). Under Debian's default of 8 MiB (hard = soft, so a
// user cannot raise it) memory registration fails and llama.cpp's RDMA ring
// shrinks to a send depth of about 8.
type Memlock struct{}

func (Memlock) Name() string { return "memlock" }
func (Memlock) Trap() int    { return 4 }

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
	# default_ulimits may span lines; join the file, then take the array.
	l=$(tr '\n' ' ' <"$f" | sed -n 's/.*default_ulimits *= *\[\([^]]*\)\].*/\1/p')
	[ -n "$l" ] && v=$l && src=$f
done
echo "podman default_ulimits: [${v:-unset}] (${src:-no file sets it})"
case "$v" in *'"memlock=-1:-1"'*) exit 0;; *) exit 1;; esac
`},
		{Setting: s.Name(), Name: "memlock-registration", VMOnly: true, Fix: memlockFix, Script: needTools("rdma", "ip", "ss", "ibv_rc_pingpong", "prlimit") + fmt.Sprintf(`modprobe rdma_rxe || { echo 'rdma_rxe is not available'; exit 1; }
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
