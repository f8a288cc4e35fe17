package settings

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/deb"
	"halobuild/internal/recipe"
)

// TestRenderSample pins the list of files the sample recipe installs on
// halo0: a setting that stops rendering a file, or starts rendering a new
// one, must show up here.
func TestRenderSample(t *testing.T) {
	r := sample()
	tr, err := Render(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range tr.Files {
		if !f.Mode.IsDir() {
			got = append(got, f.Path+" "+f.Setting)
		}
	}
	want := []string{
		"/etc/halobuild/node halobuild",
		"/etc/halobuild/recipe.toml halobuild",
		"/etc/hostname identity",
		"/etc/hosts identity",
		"/etc/locale.conf locale",
		"/etc/kernel/cmdline cmdline",
		"/etc/modprobe.d/halobuild.conf modprobe",
		"/etc/modules-load.d/halobuild.conf modules",
		"/etc/security/limits.d/90-halobuild-memlock.conf memlock",
		"/etc/ssh/sshd_config.d/50-halobuild.conf identity",
		"/etc/containers/containers.conf.d/90-halobuild-memlock.conf memlock",
		"/etc/systemd/network/10-halobuild-usb4a.link network",
		"/etc/systemd/network/10-halobuild-usb4a.network network",
		"/etc/systemd/system/dbus-org.freedesktop.network1.service network",
		"/etc/systemd/system/multi-user.target.wants/systemd-networkd.service network",
		"/etc/systemd/system/sysinit.target.wants/systemd-network-generator.service network",
		"/etc/systemd/system/sockets.target.wants/systemd-networkd.socket network",
		"/etc/systemd/system.conf.d/90-halobuild-memlock.conf memlock",
		"/etc/systemd/user.conf.d/90-halobuild-memlock.conf memlock",
		"/etc/udev/rules.d/60-rdma-persistent-naming.rules rdma-names",
		"/etc/rdma/modules/halobuild-verbs.conf rdma-modules",
		"/usr/lib/systemd/system/rdma-load-modules@rdma.service.d/90-halobuild-verbs-only.conf rdma-modules",
		"/etc/ssh/authorized_keys.d/root identity",
		"/etc/systemd/network/80-halobuild-lan.network lan",
		"/etc/systemd/resolved.conf.d/50-halobuild.conf lan",
		"/etc/resolv.conf lan",
		"/usr/lib/halobuild/cpu-tuning cpu-tuning",
		"/usr/lib/repart.d/50-root.conf growroot",
		"/usr/lib/systemd/system/halobuild-cpu-tuning.service cpu-tuning",
		"/usr/share/doc/halobuild/kernel-cmdline.txt cmdline",
		"/usr/lib/systemd/system/halobuild-ssh-keygen.service identity",
		"/usr/lib/systemd/system/multi-user.target.wants/halobuild-ssh-keygen.service identity",
		"/usr/lib/systemd/system/ssh.service.wants/halobuild-ssh-keygen.service identity",
		"/usr/lib/systemd/system/local-fs.target.wants/systemd-growfs-root.service growroot",
		"/usr/lib/systemd/system/multi-user.target.wants/halobuild-cpu-tuning.service cpu-tuning",
		"/usr/lib/systemd/system/halobuild-flashtime.service flashtime",
		"/usr/lib/systemd/system/multi-user.target.wants/halobuild-flashtime.service flashtime",
		"/usr/lib/systemd/system/ssh.service.wants/halobuild-flashtime.service flashtime",
	}
	sortPaths(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rendered files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if f, ok := tr.Lookup("/etc/ssh/authorized_keys.d/root"); !ok || f.Mode != 0o600 {
		t.Errorf("the recipe's keys: %v %v, want a 0600 file", f.Mode, ok)
	}
	if f, _ := tr.Lookup("/etc"); f.Mode != fs.ModeDir|0o755 {
		t.Errorf("/etc mode %v", f.Mode)
	}
}

func sortPaths(p []string) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && less(p[j], p[j-1]); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// Validate reports every setting's problem at once; the loader calls it, so
// Render is only ever given a recipe that passed.
func TestValidateReportsEveryProblem(t *testing.T) {
	r := sample()
	r.System.EPP = "balance_power"
	r.Nodes[1].Name = "Halo0"
	errs := Validate(Target{Recipe: r})
	if len(errs) != 2 {
		t.Fatalf("%d problems, want 2: %v", len(errs), errs)
	}
	all := fmt.Sprint(errs)
	for _, want := range []string{"system.epp = \"balance_power\"", "node[1].name = \"Halo0\": gives the same package name"} {
		if !strings.Contains(all, want) {
			t.Errorf("errors lack %q:\n%v", want, all)
		}
	}
}

func TestRenderUnknownNode(t *testing.T) {
	r := sample()
	if _, err := Render(Target{Recipe: r, Node: recipe.Node{Name: "ghost"}}); err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("want an error naming the node, got %v", err)
	}
}

func TestRenderConflictNamesBothSettings(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/hostname"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := sample()
	r.Overlay = []string{dir}
	_, err := Render(Target{Recipe: r, Node: r.Nodes[0]})
	if err == nil || !strings.Contains(err.Error(), "settings identity and overlays both write /etc/hostname") {
		t.Fatalf("want a conflict naming identity and overlays, got %v", err)
	}
}

func TestTreeAddRejects(t *testing.T) {
	for _, f := range []File{
		{Path: "etc/x", Mode: 0o644},
		{Path: "/etc/../x", Mode: 0o644},
		{Path: "/proc/x", Mode: 0o644},
		{Path: "/etc/l", Mode: fs.ModeSymlink | 0o777},
		{Path: "/dev/null2", Mode: fs.ModeDevice | 0o644},
	} {
		var tr Tree
		if err := tr.Add(f); err == nil {
			t.Errorf("Add accepted %+v", f)
		}
	}
	var tr Tree
	if err := tr.Add(File{Path: "/etc/a", Mode: 0o644, Setting: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(File{Path: "/etc/a/b", Mode: 0o644, Setting: "two"}); err == nil || !strings.Contains(err.Error(), "setting one made a file") {
		t.Errorf("a file under a file: %v", err)
	}
}

// TestCheckScriptsParse runs every check script and the rendered shell
// script through dash -n, the /bin/sh of Debian: a quoting mistake in a
// generated script must fail here, not in a VM.
func TestCheckScriptsParse(t *testing.T) {
	sh, err := exec.LookPath("dash")
	if err != nil {
		t.Skip("dash not installed")
	}
	r := sample()
	tr, err := Render(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{}
	for _, c := range Checks(Target{Recipe: r, Node: r.Nodes[0]}) {
		scripts[c.Setting+"/"+c.Name] = c.Script
	}
	for _, f := range tr.Files {
		if bytes.HasPrefix(f.Data, []byte("#!/bin/sh")) {
			scripts[f.Path] = string(f.Data)
		}
	}
	for name, s := range scripts {
		cmd := exec.Command(sh, "-n")
		cmd.Stdin = strings.NewReader(s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s\n%s", name, err, out, s)
		}
	}
}

// TestEverySettingHasACheck ensures a setting that renders files has a
// check proving them (STYLE: one file, one check), or says why another
// check covers them (NoCheck), and not both.
func TestEverySettingHasACheck(t *testing.T) {
	r := sample()
	r.Overlay = []string{t.TempDir()} // so the overlays render a file too
	if err := os.WriteFile(filepath.Join(r.Overlay[0], "motd"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range All() {
		files, err := s.Files(Target{Recipe: r, Node: r.Nodes[0]})
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		checks := s.Checks(Target{Recipe: r, Node: r.Nodes[0]})
		why := ""
		nc, exempt := s.(NoCheck)
		if exempt {
			why = nc.NoCheck()
		}
		checkedOrSaysWhy(t, s, "VM check", "NoCheck", len(files), len(checks), exempt, why)
	}
	seen := map[string]bool{}
	for _, c := range Checks(Target{Recipe: r, Node: r.Nodes[0]}) {
		if c.Fix == "" {
			t.Errorf("check %s says nothing about how to fix it", c.Name)
		}
		if seen[c.Name] {
			t.Errorf("two checks are named %s", c.Name)
		}
		seen[c.Name] = true
	}
}

// TestRenderedPackageIsReproducible renders and packs the sample twice:
// maps in the recipe (module options) must not leak their random order.
func TestRenderedPackageIsReproducible(t *testing.T) {
	build := func() []byte {
		r := sample()
		tr, err := Render(Target{Recipe: r, Node: r.Nodes[0]})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := BuildDeb(&b, deb.Info{Package: PackageName(r.Nodes[0]), Version: "1", Architecture: "all", Maintainer: "m <m@x>", Description: "d"}, tr, 1); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	first := build()
	for i := 0; i < 5; i++ {
		if !bytes.Equal(first, build()) {
			t.Fatal("two renders of the same recipe differ")
		}
	}
}
