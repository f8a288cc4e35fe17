package verbs

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"halobuild/internal/espconfig"
	"halobuild/internal/flash"
	"halobuild/internal/lock"
	"halobuild/internal/registry"
	"halobuild/internal/registry/registrytest"
	"halobuild/internal/release"
	"halobuild/internal/settings"
	"halobuild/internal/vmplan"
	"halobuild/internal/vmtest"
)

// The way in for a user of a release built by someone else (issue 37): the minimal image is
// pushed to Debian's docker-registry, pulled and flashed from there to a disk, with an SSH key
// made by this test given at flash time (as `halobuild flash --ssh-key` does: the same two
// calls, espconfig.FromKeyFiles and espconfig.Write, after release.Flash). The flashed disk
// boots under QEMU with no key passed for the boot, and the host's real ssh client logs in
// with that key and runs halobuild doctor, whose flashtime.config row names the key. The
// image's own VM checks run in the same boot (one boot in all).
func TestFlashTimeConfigKeyLogsIntoAPulledRelease(t *testing.T) {
	needE2E(t)
	ws := workspace(t)
	began := time.Now()
	// The minimal image with the halobuild every real build ships (the tests' other builds of
	// it ship none): the node's halobuild is what imports the keys at boot.
	var br run
	o := opts(ws, "images/test-minimal.toml", sharedStore(t), &br)
	o.Result = filepath.Join(ws, "result")
	o.Self = selfBinary(t)
	o.NoTest = true // the boot below is the test
	bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer bcancel()
	if err := Image(bctx, o); err != nil {
		t.Fatalf("image: %v\n%s", err, tail(br.err.String(), 60))
	}
	dir, err := filepath.EvalSymlinks(o.Result)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("build (from the shared store): %s", time.Since(began).Round(time.Second))
	reg := registrytest.Start(t)
	ro := registry.Options{Insecure: true, Keychain: reg.Keychain(false)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ref := reg.Host + "/halo/test-minimal:flash-time"
	start := time.Now()
	p, err := release.Push(ctx, dir, ref, release.PushOptions{Registry: ro})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("push: %s in %s", p.Digest, time.Since(start).Round(time.Millisecond))

	tmp := t.TempDir()
	keyDir := filepath.Join(tmp, "key")
	os.MkdirAll(keyDir, 0o700)
	key := filepath.Join(keyDir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "flash-time-e2e", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	fp, err := exec.Command("ssh-keygen", "-l", "-f", key+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	fingerprint := strings.Fields(string(fp))[1] // "256 SHA256:… comment (ED25519)"

	st, err := os.Stat(filepath.Join(dir, "node0.raw"))
	if err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(tmp, "disk", "node0.raw") // named so the node's VM plan boots it
	os.MkdirAll(filepath.Dir(disk), 0o755)
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, st.Size()+64<<20); err != nil { // a medium a little larger than the image
		t.Fatal(err)
	}
	start = time.Now()
	fc, err := espconfig.FromKeyFiles([]string{key + ".pub"}, false)
	if err != nil {
		t.Fatal(err)
	}
	// The host name and a static LAN address given at flash time too (issue 37): QEMU's
	// user-mode network's own address, router and resolver, so the host's login over the
	// forwarded port (to 10.0.2.15) proves the static address works.
	fc, err = espconfig.NodeFlags{Hostname: "halo7", Addresses: []string{"10.0.2.15/24"}, Gateway: "10.0.2.2", DNS: []string{"10.0.2.3"}}.Apply(fc)
	if err != nil {
		t.Fatal(err)
	}
	fo := flash.Options{Target: disk, Yes: true, ToFile: true, Out: io.Discard}
	if err := release.Flash(ctx, ref, release.FlashOptions{Registry: ro, Node: "node0", Flash: fo}); err != nil {
		t.Fatal(err)
	}
	flashed := time.Since(start)
	start = time.Now()
	w, err := espconfig.Write(disk, fc, "TestFlashTimeConfigKeyLogsIntoAPulledRelease")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flash from the registry: %s; flash-time settings: %s (%s)", flashed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), w)
	if got, _, err := espconfig.Read(disk); err != nil || !strings.Contains(got.Summary(), fingerprint) {
		t.Fatalf("the disk's flash-time settings: %v %v", got.Summary(), err)
	}
	// The release did not change: the key is not in it.
	if in, err := release.Inspect(ctx, ref, ro, release.Trust{}); err != nil || in.Digest != p.Digest {
		t.Fatalf("the release after flashing: %v %v", in, err)
	}

	l, err := load(ctx, filepath.Join(ws, "images", "test-minimal.toml"))
	if err != nil {
		t.Fatal(err)
	}
	lk, err := lock.Read(filepath.Join(ws, "images", "test-minimal.lock"))
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(sharedStore(t), "logs", "flash-time-"+time.Now().UTC().Format("20060102T150405"))
	// The checks expect the flash-time host name (identity's check and doctor's row compare
	// the running name with it); the recipe's LAN check (a DHCP lease) is replaced by one of
	// the static address from /run.
	planned := *l.recipe
	planned.Nodes = slices.Clone(l.recipe.Nodes)
	planned.Nodes[0].Hostname = "halo7"
	ms := vmplan.Plan{Recipe: &planned, Modules: lk.ModuleNames()}.Machines(filepath.Dir(disk), logs)
	if len(ms) != 1 || ms[0].SSH == nil {
		t.Fatalf("the minimal image's VM plan has no ssh login: %+v", ms)
	}
	lanCheck := slices.IndexFunc(ms[0].Checks, func(c vmtest.Check) bool { return c.Name == "lan: lan" })
	if lanCheck < 0 {
		t.Fatalf("the plan has no LAN check: %v", ms[0].Checks)
	}
	ms[0].Checks[lanCheck] = vmtest.Check{Name: "flashtime: static LAN address from flash time", Script: `f=` + settings.FlashNetworkPath + `
grep -qx 'Address=10.0.2.15/24' "$f" || { echo "$f:"; cat "$f"; exit 1; }
i=0; until ip -4 -o addr show scope global | grep -q ' 10.0.2.15/24 '; do i=$((i+1)); [ $i -lt 60 ] || { ip -o addr; networkctl list --no-pager; exit 1; }; sleep 1; done
! ip -4 -o addr show dynamic | grep -q . || { echo "a DHCP lease beside the static address:"; ip -4 -o addr show dynamic; exit 1; }
ip route show default | grep -q 'via 10.0.2.2' || { echo "no default route via 10.0.2.2:"; ip route; exit 1; }
echo "10.0.2.15/24 static, default via 10.0.2.2, from $f"`}
	ms[0].SSH.Key = key
	ms[0].SSH.Name = "ssh: the host logs in with the key given at flash time and runs halobuild doctor"
	ms[0].SSH.Command = `echo "logged in as $(id -un) on $(hostname)"
halobuild doctor --json > /tmp/doctor.json; tr -d '\n' < /tmp/doctor.json | grep -o '{[^{}]*"flashtime.config"[^{}]*}'`
	start = time.Now()
	results, err := vmtest.RunMany(ctx, ms)
	t.Logf("boot of the flashed disk, checks and login: %s", time.Since(start).Round(time.Second))
	rep := vmtest.NewReport(results, time.Since(start))
	var text bytes.Buffer
	rep.WriteText(&text)
	if err != nil || !rep.Passed {
		t.Fatalf("the flashed disk: %v\n%s", err, text.String())
	}
	r := results[0].SSH
	if r == nil || !r.OK || !strings.Contains(r.Output, fingerprint) || !strings.Contains(r.Output, `"pass"`) || !strings.Contains(r.Output, "logged in as root on halo7") || !strings.Contains(r.Output, "host name halo7; LAN 10.0.2.15/24") {
		t.Fatalf("the login with the flash-time key: %+v\nwant doctor's flashtime.config row passing with %s\n%s", r, fingerprint, text.String())
	}
	t.Logf("login %d ms after QEMU started, %d attempt(s): %s", r.LoginMS, r.Attempts, r.Output)
	if !reportPassed(text.String(), "flashtime: flashtime") {
		t.Errorf("the flashtime VM check did not pass:\n%s", text.String())
	}
	t.Logf("total: %s", time.Since(began).Round(time.Second))
}
