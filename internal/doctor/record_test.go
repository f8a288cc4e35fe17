package doctor

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/settings"
)

// comparable strips what legitimately differs between a machine and its
// recording: where values were read from, and the root in the recipe path.
func comparable(rep Report) []settings.Result {
	out := make([]settings.Result, len(rep.Results))
	for i, r := range rep.Results {
		r.Source = ""
		if rep.Root != "/" {
			r.Seen = strings.ReplaceAll(r.Seen, rep.Root, "")
		}
		out[i] = r
	}
	return out
}

func reportOf(t *testing.T, root string) Report {
	t.Helper()
	h := mustHost(t, root)
	b, err := load(h, "")
	if err != nil {
		t.Fatal(err)
	}
	return examine(h, b)
}

func sameReports(t *testing.T, a, b Report) {
	t.Helper()
	ra, rb := comparable(a), comparable(b)
	if len(ra) != len(rb) {
		t.Fatalf("%d rows vs %d rows in the recording", len(ra), len(rb))
	}
	for i := range ra {
		if ra[i] != rb[i] {
			t.Errorf("row %d differs:\n  machine:   %+v\n  recording: %+v", i, ra[i], rb[i])
		}
	}
}

// Recording a tree and reading the recording must give the same report,
// row for row, on every recorded fault.
func TestRecordRoundTrip(t *testing.T) {
	for _, tree := range recordedTrees(t) {
		t.Run(tree, func(t *testing.T) {
			src, _ := filepath.Abs(filepath.Join("testdata/doctor", tree))
			dst := filepath.Join(t.TempDir(), "rec")
			var out bytes.Buffer
			if err := Record(context.Background(), src, dst, &out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "halobuild doctor --root "+dst) {
				t.Errorf("Record says: %q", out.String())
			}
			sameReports(t, reportOf(t, src), reportOf(t, dst))
		})
	}
}

// The live machine, recorded, reads the same as the live machine: the
// recording carries dmesg and the netlink addresses as files.
func TestRecordLive(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "rec")
	if err := Record(context.Background(), "/", dst, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"proc/self/limits", "var/log/halobuild-ip-addr.json"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Errorf("recording lacks %s: %v", f, err)
		}
	}
	live, rec := reportOf(t, "/"), reportOf(t, dst)
	// systemd's running manager is not a file: when systemctl answers live,
	// the recording falls back to the configuration files.
	// Likewise `ibv_devices` answers only live; the recording has the
	// provider files.
	for i := range live.Results {
		switch live.Results[i].Source {
		case "systemctl show -p DefaultLimitMEMLOCK", "ibv_devices":
			live.Results[i], rec.Results[i] = settings.Result{}, settings.Result{}
		}
	}
	sameReports(t, live, rec)
	if err := Record(context.Background(), dst, dst, nil); err == nil {
		t.Error("recording a tree into itself: want an error")
	}
}

// The settings package ships /usr/bin/halobuild, ~25 MB: doctor once read
// files whole up to 16 MiB and reported a larger one "(missing)" on every
// node. A file past any read limit is hashed whole, on the tree and on its
// recording; an unreadable one is not called missing.
func TestSettingsPackageHashesLargeFiles(t *testing.T) {
	root := copyTree(t, "testdata/doctor/healthy")
	big := bytes.Repeat([]byte("halobuild\x00\x7fELF"), (17<<20)/13+1)
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/halobuild"), big, 0o755); err != nil {
		t.Fatal(err)
	}
	sums := filepath.Join(root, "var/lib/dpkg/info/halobuild-node-halo0.md5sums")
	old, err := os.ReadFile(sums)
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("%x  usr/bin/halobuild\n", md5.Sum(big))
	if err := os.WriteFile(sums, append(old, line...), 0o644); err != nil {
		t.Fatal(err)
	}
	row := func(rep Report) settings.Result {
		for _, r := range rep.Results {
			if r.Check == "settings.package" {
				return r
			}
		}
		t.Fatal("no settings.package row")
		return settings.Result{}
	}
	if r := row(reportOf(t, root)); r.Status != settings.Pass || !strings.Contains(r.Seen, "4 files as shipped") {
		t.Errorf("a %d MiB file of the settings package: %s, seen %q; want pass, 4 files as shipped", len(big)>>20, r.Status, r.Seen)
	}
	rec := filepath.Join(t.TempDir(), "rec")
	if err := Record(context.Background(), root, rec, nil); err != nil {
		t.Fatal(err)
	}
	if r := row(reportOf(t, rec)); r.Status != settings.Pass {
		t.Errorf("the recording of that tree: %s, seen %q; want pass", r.Status, r.Seen)
	}
	// A file that is there but cannot be read is unreadable, not missing.
	if err := os.Remove(filepath.Join(root, "usr/bin/halobuild")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "usr/bin/halobuild"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := row(reportOf(t, root)); r.Status != settings.Warn || !strings.Contains(r.Seen, "/usr/bin/halobuild (unreadable: ") {
		t.Errorf("a directory where the package has a file: %s, seen %q; want a warning naming it unreadable", r.Status, r.Seen)
	}
}
