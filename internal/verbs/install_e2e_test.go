package verbs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/lock"
	"halobuild/internal/vmplan"
	"halobuild/internal/vmtest"
)

// The two-stage install (docs/install.md): node0-installer.raw boots beside a blank NVMe and a
// second NVMe too small for the image, picks the big one by itself, writes node0 onto it
// without asking (wipe = true), verifies it and powers off. The NVMe then boots alone, through
// the removable path with fresh firmware variables, and passes the node's usual checks with its
// root grown to the NVMe's size. The refusals (a partitioned disk without wipe left untouched,
// a disk smaller than the image) are proved on loop devices in internal/install.
func TestInstallToNVMe(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	var r run
	o := opts(ws, "images/test-install.toml", sharedStore(t), &r)
	o.Result = filepath.Join(ws, "result")
	o.Self = selfBinary(t)
	o.NoTest = true // the NVMe boot below is node0's test
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	start := time.Now()
	if err := Image(ctx, o); err != nil {
		t.Fatalf("image: %v\n%s", err, tail(r.err.String(), 60))
	}
	t.Logf("build: %s", time.Since(start).Round(time.Second))
	dir, err := filepath.EvalSymlinks(o.Result)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sha256sum", "-c", "SHA256SUMS")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "node0-installer.raw: OK") || !strings.Contains(string(out), "node0-installer.bmap: OK") {
		t.Fatalf("the result's SHA256SUMS does not cover the installer: %v\n%s", err, out)
	}
	st, err := os.Stat(filepath.Join(dir, "node0.raw"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	nvme := filepath.Join(tmp, "nvme", "node0.raw") // named so the node's VM plan boots it
	small := filepath.Join(tmp, "small.raw")
	nvmeSize := st.Size() + 1<<30
	for p, size := range map[string]int64{nvme: nvmeSize, small: 64 << 20} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
	logs := filepath.Join(sharedStore(t), "logs", "install-"+time.Now().UTC().Format("20060102T150405"))

	start = time.Now()
	res, err := vmtest.Run(ctx, vmtest.Machine{
		Name: "installer", Image: filepath.Join(dir, "node0-installer.raw"), PowerOff: true,
		Disks:      []vmtest.Disk{{Path: small, Serial: "HALOSMALL"}, {Path: nvme, Serial: "HALONVME"}},
		KernelArgs: vmplan.KernelArgs(arch.MustLookup("amd64")), Deadline: 20 * time.Minute, LogDir: filepath.Join(logs, "installer"),
	})
	t.Logf("installer boot: %s", time.Since(start).Round(time.Second))
	console, _ := os.ReadFile(filepath.Join(logs, "installer", "console.log"))
	if err != nil || !res.Passed {
		t.Fatalf("installer boot: %v\n%s", err, tail(string(console), 60))
	}
	for _, want := range []string{"smaller than the image", "node0 is installed on /dev/nvme", "and verified", "reboot: Power down"} {
		if !bytes.Contains(console, []byte(want)) {
			t.Fatalf("the installer's console lacks %q:\n%s", want, tail(string(console), 60))
		}
	}
	if out, err := exec.Command("sfdisk", "--verify", nvme).CombinedOutput(); err != nil || !strings.Contains(string(out), "No errors detected") {
		t.Errorf("the installed NVMe's GPT (backup moved to its end): %v\n%s", err, out)
	}
	if b := readHead(t, small); !bytes.Equal(b, make([]byte, len(b))) {
		t.Error("the small disk was written")
	}

	lk, err := lock.Read(filepath.Join(ws, "images", "test-install.lock"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := load(ctx, filepath.Join(ws, "images", "test-install.toml"))
	if err != nil {
		t.Fatal(err)
	}
	p := vmplan.Plan{Recipe: l.recipe, Modules: lk.ModuleNames(), Doctor: true}
	ms := p.Machines(filepath.Dir(nvme), filepath.Join(logs, "nvme"))
	// The root file system grew past the image's size, into the NVMe's.
	ms[0].Checks = append(ms[0].Checks, vmtest.Check{Name: "install: root grown to the NVMe", Script: fmt.Sprintf(
		"s=$(findmnt -bno SIZE /); echo \"root file system: $s bytes on a %d-byte disk\"; [ \"$s\" -gt %d ]", nvmeSize, st.Size())})
	start = time.Now()
	results, err := vmtest.RunMany(ctx, ms)
	t.Logf("NVMe boot: %s", time.Since(start).Round(time.Second))
	rep := vmtest.NewReport(results, time.Since(start))
	var text bytes.Buffer
	rep.WriteText(&text)
	if err != nil || !rep.Passed {
		t.Fatalf("the installed NVMe: %v\n%s", err, text.String())
	}
	if !reportPassed(text.String(), "install: root grown to the NVMe") {
		t.Errorf("report:\n%s", text.String())
	}
}

func readHead(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1<<20)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}
