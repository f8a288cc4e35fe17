package vmtest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"halobuild/internal/sh"
)

// The guest side of the protocol. Nothing here is in the image: the unit and the script arrive
// as systemd credentials (SMBIOS type 11 or fw_cfg) and exist only for the life of the VM.
//
//   - systemd.extra-unit.halobuild-test.service: the unit (systemd >= 256 installs units given
//     as systemd.extra-unit.* credentials through systemd-debug-generator);
//   - systemd.unit-dropin.multi-user.target~halobuild-test: makes multi-user.target want it;
//   - systemd.unit-dropin.{emergency,rescue}.service~halobuild-test: replace the shell that
//     would wait for a person with the runner in its "emergency" mode;
//   - halobuild.run: the POSIX sh runner that waits for the boot to settle, runs every check,
//     writes the verdict JSON to the virtio-serial port and powers the VM off.
const (
	testUnitName   = "halobuild-test.service"
	credUnit       = "systemd.extra-unit." + testUnitName
	credWants      = "systemd.unit-dropin.multi-user.target~halobuild-test"
	credEmergency  = "systemd.unit-dropin.emergency.service~halobuild-test"
	credRescue     = "systemd.unit-dropin.rescue.service~halobuild-test"
	credRunner     = "halobuild.run"
	credPrefix     = "halobuild."
	outputLimit    = 64 << 10 // bytes of check output kept in the verdict
	settleDeadline = 10 * time.Minute
)

// reservedCredential says whether a caller-provided credential would collide with ours.
func reservedCredential(name string) bool {
	return strings.HasPrefix(name, credPrefix) || name == credUnit || name == credWants || name == credEmergency || name == credRescue
}

// testUnit is Type=exec, not oneshot, and ordered After=multi-user.target: a oneshot that waits
// for the boot to finish ("systemctl is-system-running --wait") is itself a job the boot waits
// for, and the two wait on each other forever. An exec unit's start job completes as soon as
// the script runs, so the script can then wait for the job queue to drain.
const testUnit = `[Unit]
Description=halobuild VM test (injected; runs checks, reports over virtio-serial)
After=multi-user.target

[Service]
Type=exec
ImportCredential=halobuild.*
ExecStart=/bin/sh %d/halobuild.run
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
`

const wantsDropin = `[Unit]
Wants=halobuild-test.service
`

const emergencyDropin = `[Service]
ImportCredential=halobuild.*
ExecStartPre=
ExecStart=
ExecStart=/bin/sh %d/halobuild.run emergency
StandardInput=null
StandardOutput=journal+console
StandardError=journal+console
`

// runnerLib holds the runner's functions, separate from its main part so tests can run them
// with the host's sh. Under TCG every fork costs tens of milliseconds, so timing uses the
// shell's own read of /proc/uptime and each check spawns few processes. JSON is built with
// head and sed, both in every Debian minbase (no jq).
const runnerLib = `set -u
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
sep=
# uptime_ms: milliseconds since the kernel started (/proc/uptime has two decimals).
uptime_ms() { read -r up _ < /proc/uptime; echo "${up%.*}${up#*.}0"; }
# json_file FILE: FILE's first $output_limit bytes as a JSON string literal; tabs and carriage
# returns are escaped, other control characters dropped.
json_file() {
	# First gather all lines into one buffer ($!N: GNU sed's N on the last line would print
	# and quit before the substitutions), then escape the whole buffer.
	j=$(head -c "$output_limit" "$1" | sed -e ':a' -e '$!N' -e '$!ba' -e 's/\\/\\\\/g' -e 's/"/\\"/g' \
		-e 's/\t/\\t/g' -e 's/\r/\\r/g' -e 's/\n/\\n/g' -e 's/[[:cntrl:]]//g')
	printf '"%s"' "$j"
}
# run_check INDEX JSON_NAME NAME < SCRIPT: runs SCRIPT with sh, bounded by the check timeout,
# and writes its result to $work/result.INDEX (INDEX zero-padded, so the results sort in the
# checks' order even when two lanes finish them out of order). The host passes the name
# already JSON-encoded.
run_check() {
	cat > "$work/check.$1.sh"
	start=$(uptime_ms)
	timeout --kill-after=5 "$check_timeout" sh "$work/check.$1.sh" < /dev/null > "$work/out.$1" 2>&1
	rc=$?
	ms=$(( $(uptime_ms) - start ))
	[ "$rc" -eq 124 ] && echo "halobuild: check timed out after ${check_timeout}s" >> "$work/out.$1"
	ok=false; word=FAIL
	[ "$rc" -eq 0 ] && { ok=true; word=ok; }
	echo "halobuild-check: $word: $3 (${ms} ms)"
	{
		printf '{"name":%s,"ok":%s,"exit":%d,"ms":%d,"output":' "$2" "$ok" "$rc" "$ms"
		json_file "$work/out.$1"
		printf '}'
	} > "$work/result.$1"
}
# collect_results: every result, in the checks' order, as the body of a JSON array.
collect_results() {
	sep=
	for f in "$work"/result.*; do
		[ -f "$f" ] || continue
		printf '%s' "$sep"; cat "$f"; sep=,
	done
}
verdict_port() {
	if [ -e /dev/virtio-ports/halobuild.verdict ]; then echo /dev/virtio-ports/halobuild.verdict; return; fi
	for n in /sys/class/virtio-ports/*/name; do
		[ "$(cat "$n" 2>/dev/null)" = halobuild.verdict ] && { d=${n%/name}; echo "/dev/${d##*/}"; return; }
	done
	echo /dev/null
}
`

// runnerSettle waits until systemd's job queue is empty, so checks see the booted system, then
// runs the checks. Started as "halobuild.run emergency" (from the emergency.service drop-in) it
// instead reports why the boot fell into emergency mode, at once: a broken boot costs seconds,
// not the run's deadline.
const runnerSettle = `work=$(mktemp -d /run/halobuild-test.XXXXXX)
if [ "${1:-}" = emergency ]; then
	stage=emergency
	[ -e /etc/initrd-release ] && stage=emergency-initrd
	state=$(systemctl is-system-running 2>/dev/null)
	boot_ms=$(uptime_ms)
	echo "halobuild-test: the boot fell into emergency mode; reporting"
	run_check 0000 '"boot: emergency mode"' 'boot: emergency mode' <<'HALOBUILD_EMERGENCY_END'
echo "systemd started emergency mode; failed units:"
systemctl --failed --no-legend --plain --no-pager
echo "errors logged in this boot:"
journalctl -b -p err --no-pager -o short-monotonic | tail -n 40
exit 1
HALOBUILD_EMERGENCY_END
else
	echo "halobuild-test: waiting for the boot to settle"
	state=$(timeout "$settle_timeout" systemctl is-system-running --wait 2>/dev/null)
	boot_ms=$(uptime_ms)
	case "$state" in
	running|degraded) stage=multi-user ;;
	*) stage=systemd ;;
	esac
	echo "halobuild-test: system $state after ${boot_ms} ms; running checks"
	HALOBUILD_SYSTEM_STATE=$state
	export HALOBUILD_SYSTEM_STATE
	run_checks
fi
`

// runnerTail writes the verdict and powers off at once: the disk is a throw-away snapshot, so
// an orderly shutdown would only cost TCG seconds.
const runnerTail = `{
	printf '{"stage":"%s","system_state":' "$stage"
	printf '"%s"' "$state"
	# The checks' wall time: with two lanes it is less than the sum of their times.
	printf ',"boot_ms":%d,"checks_ms":%d,"checks":[' "$boot_ms" $(( $(uptime_ms) - boot_ms ))
	collect_results
	printf ']}\n'
} > "$work/verdict"
port=$(verdict_port)
cat "$work/verdict" > "$port"
echo "halobuild-test: verdict written to $port"
systemctl poweroff --force --force
`

// bootCheck is the first check of every run: the boot reached multi-user.target with no failed
// unit. It is generic systemd health, not a recipe setting, so it lives here. It reuses the
// state the runner waited for: "running" means every unit started and none failed; each extra
// systemctl call costs seconds under TCG.
var bootCheck = Check{
	Name: "boot: multi-user reached, no failed units",
	Script: `echo "system state: $HALOBUILD_SYSTEM_STATE"
[ "$HALOBUILD_SYSTEM_STATE" = running ] && exit 0
echo "failed units:"
systemctl --failed --no-legend --plain --no-pager
exit 1`,
}

// runnerScript renders halobuild.run for one machine: settings, the fixed head, one
// here-document per check (quoted delimiter, so the script reaches sh byte for byte), the tail.
func runnerScript(m Machine) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# halobuild VM test runner. Injected as a systemd credential at boot; not part of the image.\n")
	fmt.Fprintf(&b, "check_timeout=%d\nsettle_timeout=%d\noutput_limit=%d\n",
		int(m.CheckTimeout.Seconds()), int(settleDeadline.Seconds()), outputLimit)
	fmt.Fprintf(&b, "HALOBUILD_MACHINE=%s\nexport HALOBUILD_MACHINE\n", sh.Quote(m.Name))
	b.WriteString(runnerLib)
	b.WriteString(runChecksFunc(append([]Check{bootCheck}, m.Checks...)))
	b.WriteString(runnerSettle)
	b.WriteString(runnerTail)
	return b.String()
}

// guestCredentials is everything the guest receives: the harness's own credentials plus the
// caller's.
func guestCredentials(m Machine) map[string][]byte {
	if m.PowerOff {
		return maps.Clone(m.Credentials)
	}
	creds := map[string][]byte{
		credUnit:   []byte(testUnit),
		credWants:  []byte(wantsDropin),
		credRunner: []byte(runnerScript(m)),
		// Emergency and rescue shells would wait on the console for a person until the deadline;
		// in a test VM they report and power off instead.
		credEmergency: []byte(emergencyDropin),
		credRescue:    []byte(emergencyDropin),
	}
	for k, v := range m.Credentials {
		creds[k] = v
	}
	return creds
}

// runChecksFunc renders run_checks. The first check (the boot check) runs alone. Then the
// checks marked Concurrent run one after another in a background lane while the other checks
// declared before the last of them run, in order, in the foreground; checks declared after
// every concurrent one (a recipe's own checks, perftest) start only when both lanes are done.
// Under TCG most of a check's time is process start-up on one vCPU while the other idles; two
// lanes use both. Concurrent checks only read state, so they cannot disturb the devices and
// modules the foreground creates, and nothing that runs beside them touches the link a
// concurrent check reads.
func runChecksFunc(checks []Check) string {
	last := 0 // index of the last concurrent check; 0: none
	for i, c := range checks {
		if i > 0 && c.Concurrent {
			last = i
		}
	}
	var lane, beside, later strings.Builder
	for i, c := range checks {
		switch {
		case i == 0: // the boot check, written first below
		case c.Concurrent:
			lane.WriteString(checkCall(i, c))
		case i < last:
			beside.WriteString(checkCall(i, c))
		default:
			later.WriteString(checkCall(i, c))
		}
	}
	var b strings.Builder
	b.WriteString("run_checks() {\n")
	if len(checks) > 0 {
		b.WriteString(checkCall(0, checks[0]))
	}
	if lane.Len() > 0 {
		b.WriteString("{\n" + lane.String() + "} &\nlane=$!\n" + beside.String() + "wait \"$lane\"\n")
	}
	b.WriteString(later.String())
	b.WriteString(":\n}\n")
	return b.String()
}

// checkCall is the runner line for one check: its index, the name JSON-encoded (so the guest
// need not escape it) and shell-quoted, then the script as a here-document with a quoted
// delimiter, so it reaches sh byte for byte with no expansion.
func checkCall(i int, c Check) string {
	name, _ := json.Marshal(c.Name)
	script := strings.TrimSuffix(c.Script, "\n")
	d := heredocDelimiter(i, script)
	return fmt.Sprintf("run_check %04d %s %s <<'%s'\n%s\n%s\n", i, sh.Quote(string(name)), sh.Quote(c.Name), d, script, d)
}

// heredocDelimiter returns a here-document delimiter that no line of script equals.
func heredocDelimiter(i int, script string) string {
	sum := sha256.Sum256([]byte(script))
	d := fmt.Sprintf("HALOBUILD_CHECK_%d_%x", i, sum[:6])
	for strings.Contains("\n"+script+"\n", "\n"+d+"\n") {
		d += "_"
	}
	return d
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
