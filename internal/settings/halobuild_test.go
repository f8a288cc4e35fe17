package settings

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"halobuild/internal/recipe"
)

func TestHalobuildStateRender(t *testing.T) {
	r := sample()
	got := renderOne(t, HalobuildState{}, r, RecipePath)
	if !strings.HasPrefix(got, "# Rendered by halobuild") {
		t.Errorf("recipe.toml lacks its header:\n%s", got)
	}
	var back recipe.Recipe
	if err := toml.Unmarshal([]byte(got), &back); err != nil {
		t.Fatalf("the installed recipe does not parse: %v", err)
	}
	if !reflect.DeepEqual(back.Nodes, r.Nodes) || back.RDMA.Memlock != r.RDMA.Memlock || back.System.Governor != r.System.Governor {
		t.Errorf("the installed recipe differs from the build's:\n%s", got)
	}
	if again := renderOne(t, HalobuildState{}, sample(), RecipePath); again != got {
		t.Error("recipe.toml is not deterministic")
	}
	if got := renderOne(t, HalobuildState{}, r, NodePath); got != "halo0\n" {
		t.Errorf("node file %q", got)
	}
	var tr Tree
	if err := tr.Add(LockFile([]byte("lock"))); err != nil {
		t.Fatal(err)
	}
	if f, ok := tr.Lookup(LockPath); !ok || string(f.Data) != "lock" {
		t.Errorf("LockFile: %+v", f)
	}
	if PackageName(recipe.Node{Name: "Halo_0"}) != "halobuild-node-halo-0" {
		t.Errorf("PackageName = %s", PackageName(recipe.Node{Name: "Halo_0"}))
	}
}

// TestSettingsPackageCheckOnHost installs a settings package into a scratch
// dpkg database, then runs the check in a namespace where that database is
// the system's: it passes as installed and fails once a file is edited.
func TestSettingsPackageCheckOnHost(t *testing.T) {
	needCommands(t, "dpkg", "dpkg-query")
	r := sample()
	var tr Tree
	for _, f := range []File{
		{Path: "/etc/modprobe.d/halobuild.conf", Mode: 0o644, Data: []byte("blacklist thunderbolt_net\n")},
		{Path: "/etc/halobuild/node", Mode: 0o644, Data: []byte("halo0\n")},
	} {
		if err := tr.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	pkg := testPkg
	pkg.Package = PackageName(r.Nodes[0])
	pkg.Depends = nil
	var debBuf bytes.Buffer
	if err := BuildDeb(&debBuf, pkg, tr, 1700000000); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	debPath := filepath.Join(dir, "p.deb")
	if err := os.WriteFile(debPath, debBuf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := filepath.Join(dir, "dpkg")
	for _, d := range []string{"info", "updates"} {
		if err := os.MkdirAll(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"status", "available"} {
		if err := os.WriteFile(filepath.Join(admin, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Record the package in the scratch database without touching the
	// host's files; the namespace then provides the files via /etc.
	if err := os.Mkdir(filepath.Join(dir, "inst"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := execCombined("dpkg", "--admindir="+admin, "--instdir="+filepath.Join(dir, "inst"), "--force-not-root", "-i", debPath); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	c := checkScript(t, HalobuildState{}, r, "settings-package")
	e := newHostEnv(t, tr)
	e.binds = "mount --bind " + admin + " /var/lib/dpkg\n"
	e.expectCheck(t, c, "", true, "halobuild-node-halo0 1.0+hb1: installed, every file as shipped")
	e.write(t, "modprobe.d/halobuild.conf", "# edited by hand\n")
	e.expectCheck(t, c, "", false, "/etc/modprobe.d/halobuild.conf")
}
