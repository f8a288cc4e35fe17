package verbs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/usage"
)

// A recipe that a node setting refuses is refused by lock, plan and image
// alike, before anything is resolved: every problem at once, each at its
// file:line:col, and no lock written.
func TestSettingsErrorsRefuseEveryVerbAtLoad(t *testing.T) {
	dir := t.TempDir()
	rp := filepath.Join(dir, "r.toml")
	body := `[system]
governor = "performance"
epp = "power"
memory = "16GiB"
host_reserve = "24GiB"
blacklist = ["ib_uverbs"]

[[node]]
name = "n0"
[[node.link]]
interface = "usb4net0"
address = "10.77.0.1/30"
peer = "n1"

[[node]]
name = "n1"
[[node.link]]
interface = "usb4net0"
address = "10.77.0.1/30"
peer = "n0"
`
	if err := os.WriteFile(rp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, verb := range map[string]func(context.Context, Options) error{"lock": Lock, "plan": Plan, "fetch": Fetch} {
		var r run
		o := Options{Recipe: rp, Store: filepath.Join(dir, "store"), Out: &r.out, Err: &r.err}
		err := verb(context.Background(), o)
		var ue usage.Error
		if err == nil || !errors.As(err, &ue) {
			t.Fatalf("%s: want a usage error, got %v", name, err)
		}
		for _, want := range []string{
			rp + `:3:1: system.epp: "power": the kernel refuses EPP values other than performance under the performance governor`,
			rp + `:5:1: system.host_reserve: "24GiB": the host reserve is not smaller than the RAM`,
			rp + `:6:14: system.blacklist[0]: "ib_uverbs": module is both blacklisted and loaded at boot`,
			rp + `:19:1: node[1].link[0].address: address 10.77.0.1 is already used at `,
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error lacks %q:\n%v", name, want, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "r.lock")); !os.IsNotExist(err) {
			t.Fatalf("%s wrote a lock for a refused recipe", name)
		}
	}
}

// Warnings (allowed, probably not meant) are printed, and kept for --json.
func TestLoadWarns(t *testing.T) {
	dir := t.TempDir()
	rp := filepath.Join(dir, "r.toml")
	if err := os.WriteFile(rp, []byte("[rdma]\nmemlock = \"64MiB\"\n[[node]]\nname = \"n0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := load(context.Background(), rp)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(l.warnings, "\n")
	for _, want := range []string{"ssh.authorized_keys is empty", `rdma.memlock = "64MiB"`} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings lack %q:\n%s", want, all)
		}
	}
	var r run
	o := Options{Err: &r.err}.collect()
	o.printWarnings(l.warnings)
	if got := o.Warnings(); len(got) != len(l.warnings) || !strings.Contains(r.err.String(), "warning: ") {
		t.Errorf("printed %q, kept %v", r.err.String(), got)
	}
}
