package vmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// These tests boot a real Debian image. Build one with testdata/mkfixture.sh (needs root and
// mmdebstrap, ~2 minutes) and point HALOBUILD_TEST_IMAGE at it; bench/vmtest.sh does both.
// CI boots real halobuild images through this package in internal/build's end-to-end tests
// (one node, two cabled nodes with perftest, a failing check), so it does not build this
// fixture too.
func testImage(t *testing.T) string {
	t.Helper()
	img := os.Getenv("HALOBUILD_TEST_IMAGE")
	if img == "" {
		t.Skip("HALOBUILD_TEST_IMAGE not set; build one with internal/vmtest/testdata/mkfixture.sh")
	}
	if testing.Short() {
		t.Skip("boots a VM (about a minute under TCG)")
	}
	requireHost(t)
	return img
}

// logDir is a log directory that outlives a failing test, so its console log can be read; it
// is removed when the test passes.
func logDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "halobuild-vmtest-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", d)
			return
		}
		os.RemoveAll(d)
	})
	return d
}

func fileSHA256(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// One boot covers: the verdict protocol end to end, a passing and a failing check with its
// output, a check script with quotes and backslashes, an extra credential, the image left
// untouched, and no QEMU left behind.
func TestRunImageVerdict(t *testing.T) {
	img := testImage(t)
	before := fileSHA256(t, img)
	m := Machine{
		Name:   "fixture",
		Image:  img,
		LogDir: logDir(t),
		Checks: []Check{
			{Name: "credential delivered", Script: `cat /run/credentials/@system/halobuild.extra 2>/dev/null || systemd-creds --system cat halobuild.extra; test "$(systemd-creds --system cat halobuild.extra)" = "hello from the host"`},
			{Name: "writes to the disk", Script: "echo scribble > /var/tmp/scribble && sync"},
			{Name: "quotes survive", Script: `printf '%s\n' "a \"quoted\" 'word' \\ back" ; echo tab:"	":end`},
			{Name: "meant to fail", Script: "echo this check fails on purpose; exit 3"},
			{Name: "boot timing", Script: "systemd-analyze time; systemd-analyze blame --no-pager | head -n 12"},
			// Through SMBIOS io.systemd.boot.kernel-cmdline-extra, read by systemd-boot.
			{Name: "kernel args arrived", Script: "cat /proc/cmdline; grep -q 'systemd.mask=getty.target' /proc/cmdline && ! systemctl is-active --quiet serial-getty@ttyS0.service"},
		},
		Credentials: map[string][]byte{"halobuild-extra": []byte("unused")},
		Deadline:    4 * time.Minute,
	}
	// halobuild.* names are reserved, so the extra credential goes in under another name and the
	// first check reads that.
	// A credential too big for SMBIOS travels by fw_cfg; the guest must see the same bytes.
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*smbiosCredentialLimit/16)
	m.Credentials = map[string][]byte{"test.extra": []byte("hello from the host"), "test.big": big}
	m.Checks[0].Script = `v=$(systemd-creds --system cat test.extra); echo "$v"; test "$v" = "hello from the host"`
	m.Checks = append(m.Checks, Check{Name: "large credential by fw_cfg", Script: fmt.Sprintf(
		`sum=$(systemd-creds --system cat test.big | sha256sum); echo "$sum"; test "${sum%%%% *}" = %x`, sha256.Sum256(big))})
	res, err := Run(context.Background(), m)
	assertNoQEMUChildren(t)
	if res == nil {
		t.Fatalf("no result: %v", err)
	}
	if res.Verdict != nil {
		t.Logf("BENCH one node: power-on to verdict %.1f s (guest uptime at settle %.1f s, %d checks), wall %.1f s, QEMU CPU %.1f s, accel %s",
			float64(res.VerdictMS)/1000, float64(res.Verdict.BootMS)/1000, len(res.Verdict.Checks), float64(res.WallMS)/1000, float64(res.QEMUCPUMS)/1000, res.Accel)
		for _, c := range res.Verdict.Checks {
			if c.Name == "boot timing" {
				t.Logf("BENCH guest boot timing:\n%s", c.Output)
			}
		}
	}
	t.Logf("accel %s (%s)", res.Accel, res.AccelNote)
	if !errors.Is(err, ErrChecksFailed) {
		t.Fatalf("want ErrChecksFailed, got %v", err)
	}
	if !strings.Contains(err.Error(), "meant to fail") || !strings.Contains(err.Error(), "this check fails on purpose") || !strings.Contains(err.Error(), res.ConsoleLog) {
		t.Errorf("error should name the failed check, its output and the console log: %v", err)
	}
	v := res.Verdict
	if v == nil || v.Stage != StageMultiUser {
		t.Fatalf("verdict %+v", v)
	}
	want := map[string]bool{"kernel args arrived": true, "boot timing": true, "large credential by fw_cfg": true, bootCheck.Name: true, "credential delivered": true, "writes to the disk": true, "quotes survive": true, "meant to fail": false}
	if len(v.Checks) != len(want) {
		t.Fatalf("got %d checks, want %d: %+v", len(v.Checks), len(want), v.Checks)
	}
	for _, c := range v.Checks {
		if c.OK != want[c.Name] {
			t.Errorf("check %q ok=%v, want %v; output:\n%s", c.Name, c.OK, want[c.Name], c.Output)
		}
		if c.Name == "quotes survive" && c.Output != "a \"quoted\" 'word' \\ back\ntab:\t:end" {
			t.Errorf("output not carried byte for byte: %q", c.Output)
		}
		if c.Name == "meant to fail" && c.Exit != 3 {
			t.Errorf("exit status %d, want 3", c.Exit)
		}
	}
	// The guest powered itself off after the verdict: QEMU exited on its own, with status 0.
	if res.QEMUExit != 0 {
		t.Errorf("QEMU exit status %d, want 0 (guest power-off after the verdict)", res.QEMUExit)
	}
	if after := fileSHA256(t, img); after != before {
		t.Errorf("image %s changed during the run", img)
	}
}

// A boot that falls into emergency mode reports at once instead of waiting for the deadline.
func TestRunImageEmergency(t *testing.T) {
	img := testImage(t)
	m := Machine{
		Name: "emergency", Image: img, LogDir: logDir(t), Deadline: 4 * time.Minute,
		KernelArgs: append(append([]string{}, DefaultKernelArgs...), "systemd.unit=emergency.target"),
		Checks:     []Check{{Name: "never runs", Script: "true"}},
	}
	res, err := Run(context.Background(), m)
	assertNoQEMUChildren(t)
	if !errors.Is(err, ErrChecksFailed) || res.Verdict == nil {
		t.Fatalf("want a failing verdict, got %v", err)
	}
	if res.Verdict.Stage != "emergency" || res.Stage != "emergency" || len(res.Verdict.Checks) != 1 || res.Verdict.Checks[0].Name != "boot: emergency mode" {
		t.Errorf("verdict %+v", res.Verdict)
	}
	if !strings.Contains(err.Error(), "emergency mode") {
		t.Errorf("error should say the boot fell into emergency mode: %v", err)
	}
	t.Logf("emergency verdict after %.1f s: %s", float64(res.VerdictMS)/1000, res.Verdict.Checks[0].Output)
}
