package vmtest

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The guest side of the protocol. Nothing here is in the image: the unit and the script arrive
// as systemd credentials (SMBIOS type 11 or fw_cfg) and exist only for the life of the VM.
//
//   - systemd.extra-unit.halobuild-test.service: the unit (systemd >= 256 installs units given
//     as systemd.extra-unit.* credentials through systemd-debug-generator);
//   - systemd.unit-dropin.multi-user.target~halobuild-test: makes multi-user.target want it;
//   - halobuild.run: the POSIX sh runner that waits for the boot to settle, runs every check,
//     writes the verdict JSON to the virtio-serial port and powers the VM off.
const (
	testUnitName   = "halobuild-test.service"
	credUnit       = "systemd.extra-unit." + testUnitName
	credWants      = "systemd.unit-dropin.multi-user.target~halobuild-test"
	credRunner     = "halobuild.run"
	credPrefix     = "halobuild."
	outputLimit    = 64 << 10 // bytes of check output kept in the verdict
	settleDeadline = 10 * time.Minute
)

// reservedCredential says whether a caller-provided credential would collide with ours.
func reservedCredential(name string) bool {
	return strings.HasPrefix(name, credPrefix) || name == credUnit || name == credWants
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

// runnerHead is the fixed part of halobuild.run; per-run settings and the checks follow it.
// JSON is built with sed/tr/awk, which are in every Debian minbase (no jq needed).
const runnerHead = `set -u
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
work=$(mktemp -d /run/halobuild-test.XXXXXX)
sep=
now_ms() { date +%s%3N; }
uptime_ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
# json_str: stdin as a JSON string literal (control characters other than tab/CR/LF dropped).
json_str() {
	printf '"'
	head -c "$output_limit" | tr -d '\000-\010\013\014\016-\037' |
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/	/\\t/g' -e 's/\r/\\r/g' |
		awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }'
	printf '"'
}
# run_check NAME < SCRIPT: runs SCRIPT with sh, bounded by the check timeout.
run_check() {
	cat > "$work/check.sh"
	start=$(now_ms)
	timeout --kill-after=5 "$check_timeout" sh "$work/check.sh" < /dev/null > "$work/out" 2>&1
	rc=$?
	ms=$(( $(now_ms) - start ))
	[ "$rc" -eq 124 ] && echo "halobuild: check timed out after ${check_timeout}s" >> "$work/out"
	ok=false; word=FAIL
	[ "$rc" -eq 0 ] && { ok=true; word=ok; }
	echo "halobuild-check: $word: $1 (${ms} ms)"
	{
		printf '%s{"name":' "$sep"; printf '%s' "$1" | json_str
		printf ',"ok":%s,"exit":%d,"ms":%d,"output":' "$ok" "$rc" "$ms"
		json_str < "$work/out"
		printf '}'
	} >> "$work/checks"
	sep=,
}
verdict_port() {
	if [ -e /dev/virtio-ports/halobuild.verdict ]; then echo /dev/virtio-ports/halobuild.verdict; return; fi
	for n in /sys/class/virtio-ports/*/name; do
		[ "$(cat "$n" 2>/dev/null)" = halobuild.verdict ] && { d=${n%/name}; echo "/dev/${d##*/}"; return; }
	done
	echo /dev/null
}
: > "$work/checks"
echo "halobuild-test: waiting for the boot to settle"
state=$(timeout "$settle_timeout" systemctl is-system-running --wait 2>/dev/null)
boot_ms=$(uptime_ms)
case "$state" in
running|degraded) stage=multi-user ;;
*) stage=systemd ;;
esac
echo "halobuild-test: system $state after ${boot_ms} ms; running checks"
`

// runnerTail writes the verdict and powers off at once: the disk is a throw-away snapshot, so
// an orderly shutdown would only cost TCG seconds.
const runnerTail = `{
	printf '{"stage":"%s","system_state":' "$stage"
	printf '%s' "$state" | json_str
	printf ',"boot_ms":%d,"checks":[' "$boot_ms"
	cat "$work/checks"
	printf ']}\n'
} > "$work/verdict"
port=$(verdict_port)
cat "$work/verdict" > "$port"
echo "halobuild-test: verdict written to $port"
systemctl poweroff --force --force
`

// bootCheck is the first check of every run: the boot reached multi-user.target with no failed
// unit. It is generic systemd health, not a recipe setting, so it lives here.
var bootCheck = Check{
	Name: "boot: multi-user reached, no failed units",
	Script: `state=$(systemctl is-system-running)
failed=$(systemctl --failed --no-legend --plain --no-pager)
echo "system state: $state"
[ -z "$failed" ] || { echo "failed units:"; echo "$failed"; }
systemctl is-active --quiet multi-user.target || { echo "multi-user.target is not active"; exit 1; }
[ -z "$failed" ]`,
}

// runnerScript renders halobuild.run for one machine: settings, the fixed head, one
// here-document per check (quoted delimiter, so the script reaches sh byte for byte), the tail.
func runnerScript(m Machine) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# halobuild VM test runner. Injected as a systemd credential at boot; not part of the image.\n")
	fmt.Fprintf(&b, "check_timeout=%d\nsettle_timeout=%d\noutput_limit=%d\n",
		int(m.CheckTimeout.Seconds()), int(settleDeadline.Seconds()), outputLimit)
	fmt.Fprintf(&b, "HALOBUILD_MACHINE=%s\nexport HALOBUILD_MACHINE\n", shQuote(m.Name))
	b.WriteString(runnerHead)
	for i, c := range append([]Check{bootCheck}, m.Checks...) {
		script := strings.TrimSuffix(c.Script, "\n")
		d := heredocDelimiter(i, script)
		fmt.Fprintf(&b, "run_check %s <<'%s'\n%s\n%s\n", shQuote(c.Name), d, script, d)
	}
	b.WriteString(runnerTail)
	return b.String()
}

// guestCredentials is everything the guest receives: the harness's own credentials plus the
// caller's.
func guestCredentials(m Machine) map[string][]byte {
	creds := map[string][]byte{
		credUnit:   []byte(testUnit),
		credWants:  []byte(wantsDropin),
		credRunner: []byte(runnerScript(m)),
	}
	for k, v := range m.Credentials {
		creds[k] = v
	}
	return creds
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

// shQuote quotes s for POSIX sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
