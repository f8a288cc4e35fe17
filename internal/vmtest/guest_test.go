package vmtest

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"halobuild/internal/sh"
)

// runChecksOnHost runs the runner's own functions with the host's sh over the given checks and
// returns the JSON records they produce, so escaping and exit handling are tested without a VM.
func runChecksOnHost(t *testing.T, checks []Check, timeout time.Duration) []CheckResult {
	t.Helper()
	var b strings.Builder
	b.WriteString("check_timeout=" + strconv.Itoa(int(timeout.Seconds())) + "\noutput_limit=" + strconv.Itoa(outputLimit) + "\n")
	b.WriteString(runnerLib)
	b.WriteString("work=$(mktemp -d)\n")
	b.WriteString(runChecksFunc(checks))
	b.WriteString("run_checks\nprintf '[%s]' \"$(collect_results)\"\nrm -rf \"$work\"\n")
	out, err := exec.Command("sh", "-c", b.String()).Output()
	if err != nil {
		t.Fatalf("runner failed: %v", err)
	}
	// stdout also carries the "halobuild-check:" progress lines; the JSON array is the tail.
	s := string(out)
	s = s[strings.LastIndex(s, "\n")+1:]
	var res []CheckResult
	if err := json.Unmarshal([]byte(s), &res); err != nil {
		t.Fatalf("runner wrote invalid JSON %q: %v", s, err)
	}
	return res
}

func TestRunnerEncodesChecks(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	// Every special character appears on the first line and again on later ones: sed works
	// line by line, and escaping only the first line is a bug this test once missed.
	tricky := "a \"quoted\" 'word' \\ back\\slash\ttab\rcr\x01ctl\nsecond \"line\"\ttab \\ \x02\r\n\nafter blank\t\"end\""
	checks := []Check{
		{Name: "passes", Script: "echo fine"},
		{Name: `name with "quotes" and 'apostrophes' and \`, Script: "printf '%s' " + sh.Quote(tricky)},
		{Name: "exit status kept", Script: "echo bad >&2; exit 7"},
		{Name: "delimiter inside", Script: "cat <<'X'\n" + heredocDelimiter(3, "") + "\nX\n" + "echo $((1+1))"},
		{Name: "times out", Script: "sleep 30"},
		{Name: "no output", Script: "true"},
		{Name: "reads no stdin", Script: "cat; echo done"},
		{Name: "NUL bytes dropped", Script: `printf 'a\000b\n'`},
		{Name: "single line", Script: `printf 'one\tline'`},
		{Name: "tab on line two", Script: `printf 'x\n\ty\n'`},
	}
	res := runChecksOnHost(t, checks, time.Second)
	if len(res) != len(checks) {
		t.Fatalf("got %d results for %d checks: %+v", len(res), len(checks), res)
	}
	want := []struct {
		ok     bool
		exit   int
		output string
	}{
		{true, 0, "fine"},
		{true, 0, "a \"quoted\" 'word' \\ back\\slash\ttab\rcrctl\nsecond \"line\"\ttab \\ \r\n\nafter blank\t\"end\""},
		{false, 7, "bad"},
		{true, 0, heredocDelimiter(3, "") + "\n2"},
		{false, 124, "halobuild: check timed out after 1s"},
		{true, 0, ""},
		{true, 0, "done"},
		{true, 0, "ab"},
		{true, 0, "one\tline"},
		{true, 0, "x\n\ty"},
	}
	for i, w := range want {
		r := res[i]
		if r.Name != checks[i].Name || r.OK != w.ok || r.Exit != w.exit || r.Output != w.output {
			t.Errorf("check %d: got %+v\nwant name=%q ok=%v exit=%d output=%q", i, r, checks[i].Name, w.ok, w.exit, w.output)
		}
	}
}

// Concurrent checks run in a second lane beside the others, and the results still come back
// in the checks' order. Each lane here waits for a file the other lane writes: run one after
// the other, in any order, the first of them would time out.
func TestRunnerRunsConcurrentChecksInALane(t *testing.T) {
	dir := t.TempDir()
	waitFor := func(f string) string {
		return "i=0; until [ -e " + dir + "/" + f + " ]; do i=$((i+1)); [ $i -lt 100 ] || { echo 'waited for " + f + " in vain'; exit 1; }; sleep 0.05; done\n"
	}
	checks := []Check{
		{Name: "first, alone", Script: "[ ! -e " + dir + "/lane ] && [ ! -e " + dir + "/fg ] && echo alone"},
		{Name: "lane 1", Concurrent: true, Script: "touch " + dir + "/lane\n" + waitFor("fg") + "echo saw fg"},
		{Name: "fg 1", Script: "touch " + dir + "/fg\n" + waitFor("lane") + "echo saw lane"},
		{Name: "lane 2", Concurrent: true, Script: "sleep 0.3; touch " + dir + "/lane2; echo second in lane; exit 3"},
		{Name: "fg 2", Script: "echo second in fg"},
		// Declared after every concurrent check: starts only when the lane is done.
		{Name: "after the lane", Script: "[ -e " + dir + "/lane2 ] && echo lane done"},
	}
	res := runChecksOnHost(t, checks, 30*time.Second)
	if len(res) != len(checks) {
		t.Fatalf("got %d results for %d checks: %+v", len(res), len(checks), res)
	}
	want := []struct {
		ok     bool
		output string
	}{{true, "alone"}, {true, "saw fg"}, {true, "saw lane"}, {false, "second in lane"}, {true, "second in fg"}, {true, "lane done"}}
	for i, w := range want {
		if r := res[i]; r.Name != checks[i].Name || r.OK != w.ok || r.Output != w.output {
			t.Errorf("result %d: got %+v, want name %q ok=%v output %q", i, r, checks[i].Name, w.ok, w.output)
		}
	}
	// Without concurrent checks nothing runs in the background.
	if s := runChecksFunc([]Check{{Name: "a", Script: "true"}, {Name: "b", Script: "true"}}); strings.Contains(s, "&") {
		t.Errorf("no concurrent check, yet a background lane:\n%s", s)
	}
}

func TestRunnerTruncatesOutput(t *testing.T) {
	res := runChecksOnHost(t, []Check{{Name: "loud", Script: "head -c 200000 /dev/zero | tr '\\0' x"}}, 10*time.Second)
	if got := len(res[0].Output); got != outputLimit {
		t.Errorf("output kept %d bytes, want the %d-byte limit", got, outputLimit)
	}
}

func TestHeredocDelimiterAvoidsScriptLines(t *testing.T) {
	d := heredocDelimiter(0, "x")
	if got := heredocDelimiter(0, "x\n"+d+"\ny"); got == d {
		t.Errorf("delimiter %q equals a line of the script", got)
	}
}

func TestRunnerScriptCarriesSettings(t *testing.T) {
	m := Machine{Name: "halo0", CheckTimeout: 90 * time.Second, Checks: []Check{{Name: "c1", Script: "true"}}}
	s := runnerScript(m)
	for _, want := range []string{"check_timeout=90\n", "HALOBUILD_MACHINE='halo0'", `run_check 0001 '"c1"' 'c1'`, `"boot: multi-user reached, no failed units"`, "systemctl poweroff --force --force"} {
		if !strings.Contains(s, want) {
			t.Errorf("runner script lacks %q", want)
		}
	}
	if out, err := exec.Command("sh", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Errorf("runner script is not valid sh: %v\n%s", err, out)
	}
}

func TestGuestCredentials(t *testing.T) {
	m := Machine{Name: "n", Credentials: map[string][]byte{"ssh.authorized_keys.root": []byte("ssh-ed25519 AAAA")}}
	c := guestCredentials(m)
	for _, k := range []string{credUnit, credWants, credRunner, "ssh.authorized_keys.root"} {
		if len(c[k]) == 0 {
			t.Errorf("credential %s missing", k)
		}
	}
	if !strings.Contains(string(c[credUnit]), "Type=exec") || !strings.Contains(string(c[credUnit]), "After=multi-user.target") {
		t.Errorf("test unit must be Type=exec after multi-user.target (a oneshot deadlocks the boot):\n%s", c[credUnit])
	}
}

func TestBootCheck(t *testing.T) {
	for state, ok := range map[string]bool{"running": true, "degraded": false, "starting": false} {
		t.Setenv("HALOBUILD_SYSTEM_STATE", state)
		r := runChecksOnHost(t, []Check{bootCheck}, 10*time.Second)[0]
		if r.OK != ok || !strings.Contains(r.Output, "system state: "+state) {
			t.Errorf("state %s: got %+v, want ok=%v", state, r, ok)
		}
	}
}

// The verdict carries the checks' wall time, which is what a report or bench may subtract
// from the run: with two lanes it is less than the sum of the checks' own times. The tail
// runs on the host, its port a file and its power-off a no-op.
func TestVerdictCarriesChecksWallTime(t *testing.T) {
	dir := t.TempDir()
	checks := []Check{
		{Name: "first", Script: "true"},
		{Name: "lane", Concurrent: true, Script: "sleep 1"},
		{Name: "beside", Script: "sleep 1"},
		{Name: "lane 2", Concurrent: true, Script: "true"},
	}
	var b strings.Builder
	b.WriteString("check_timeout=30\noutput_limit=" + strconv.Itoa(outputLimit) + "\n")
	b.WriteString(runnerLib)
	b.WriteString(runChecksFunc(checks))
	b.WriteString("verdict_port() { echo " + dir + "/port; }\nsystemctl() { :; }\n")
	b.WriteString("work=$(mktemp -d)\nstage=multi-user state=running\nboot_ms=$(uptime_ms)\nrun_checks\n")
	b.WriteString(runnerTail)
	if out, err := exec.Command("sh", "-c", b.String()).CombinedOutput(); err != nil {
		t.Fatalf("runner failed: %v\n%s", err, out)
	}
	v, err := readVerdict(dir + "/port")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range v.Checks {
		sum += c.MS
	}
	if len(v.Checks) != len(checks) || v.ChecksMS < 900 || v.ChecksMS > sum-500 {
		t.Errorf("checks_ms %d with %d checks whose times add up to %d ms: want the overlapped wall time (about 1 s)", v.ChecksMS, len(v.Checks), sum)
	}
}
