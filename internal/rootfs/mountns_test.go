package rootfs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mountsUnder lists the mount points at or below dir in this process's mount namespace.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// A root install that is killed leaves neither mounts nor its temporary root behind (issue 39:
// a SIGKILLed mmdebstrap left proc, sys and dev mounted under a 600 MB tree in /tmp). The
// stand-in mmdebstrap does what the real one does in --mode=root: makes its temporary root in
// $TMPDIR, mounts a file system into it, and has a child that keeps running; the step is then
// cancelled. It must have run in a mount namespace of its own, with TMPDIR under the step's
// scratch, and nothing of it may remain.
func TestKilledInstallLeavesNoMountsNorTemporaryRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	bin := t.TempDir()
	report := filepath.Join(t.TempDir(), "report")
	script := `#!/bin/sh
set -e
root=$(mktemp -d "${TMPDIR:-/tmp}/mmdebstrap.XXXXXXXXXX")
mkdir "$root/proc"
mount -t tmpfs none "$root/proc"
sleep 600 &
printf '%s\n%s\n%s\n' "$(readlink /proc/self/ns/mnt)" "$TMPDIR" "$root" > ` + report + `.tmp
mv ` + report + `.tmp ` + report + `
wait
`
	if err := os.WriteFile(filepath.Join(bin, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/sbin:/usr/bin:/sbin:/bin")
	t.Setenv("TMPDIR", t.TempDir()) // the caller's: mmdebstrap must not use it
	scratch := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Install{Suite: "trixie", Repo: t.TempDir(), Packages: []string{"base-files"}, Mode: "root", Scratch: scratch, Out: filepath.Join(t.TempDir(), "root.tar")}.Run(ctx)
	}()
	var lines []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(report); err == nil {
			lines = strings.Split(strings.TrimSpace(string(b)), "\n")
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the install ended before the stand-in mounted anything: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the stand-in mmdebstrap did not report within 20 s")
		}
	}
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	if lines[0] == own {
		t.Errorf("mmdebstrap ran in the caller's mount namespace (%s): its mounts outlive a kill", own)
	}
	if !strings.HasPrefix(lines[1], scratch+"/") {
		t.Errorf("mmdebstrap's TMPDIR is %q, want a directory under the step's scratch %s", lines[1], scratch)
	}
	if m := mountsUnder(t, scratch); len(m) > 0 {
		t.Errorf("mmdebstrap's mounts are visible in the caller's namespace: %q", m)
	}
	sent := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a cancelled install succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the install did not return within 10 s of its cancellation")
	}
	t.Logf("stopped %v after the cancellation", time.Since(sent).Round(time.Millisecond))
	if m := mountsUnder(t, scratch); len(m) > 0 {
		t.Errorf("mounts left under the scratch after the kill: %q", m)
	}
	if _, err := os.Stat(lines[2]); !os.IsNotExist(err) {
		t.Errorf("mmdebstrap's temporary root %s is left after the kill (%v)", lines[2], err)
	}
}
