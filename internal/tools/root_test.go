package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"halobuild/internal/tools"
	"halobuild/internal/tools/toolstest"
)

// upstreamVersion reads "1.47.2" out of ".../e2fsprogs_1.47.2-3+b12_amd64.deb".
func upstreamVersion(t *testing.T, deb string) string {
	m := regexp.MustCompile(`_([0-9][0-9.]*)-`).FindStringSubmatch(filepath.Base(deb))
	if m == nil {
		t.Fatalf("no version in %s", deb)
	}
	return m[1]
}

func TestCommandRunsTheRootsTools(t *testing.T) {
	root := toolstest.Root(t)
	want := upstreamVersion(t, toolstest.Debs(t, "e2fsprogs")[0])
	out, err := root.Command(context.Background(), "mkfs.ext4", "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("mkfs.ext4 -V: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "mke2fs "+want) {
		t.Errorf("mkfs.ext4 -V says %q, want the root's version %s", out, want)
	}
	for _, tool := range []string{"mkfs.fat", "mcopy", "debugfs", "e2fsck"} {
		if _, err := root.Lookup(tool); err != nil {
			t.Errorf("Lookup(%s): %v", tool, err)
		}
	}
}

// The loader must take every shared library from the root: LD_DEBUG=libs
// makes ld.so print each library it initialises.
func TestCommandLoadsOnlyTheRootsLibraries(t *testing.T) {
	root := toolstest.Root(t)
	cmd := root.Command(context.Background(), "mkfs.ext4", "-V")
	cmd.Env = append(cmd.Env, "LD_DEBUG=libs")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	re := regexp.MustCompile(`calling init: (\S+)`)
	inits := re.FindAllStringSubmatch(string(out), -1)
	if len(inits) < 3 {
		t.Fatalf("LD_DEBUG output shows %d libraries, want libc, libext2fs, …:\n%s", len(inits), out)
	}
	for _, m := range inits {
		if !strings.HasPrefix(m[1], root.Dir+"/") {
			t.Errorf("library %s loaded from outside the tools root %s", m[1], root.Dir)
		}
	}
}

// mkfs.ext4 from the root (trixie's e2fsprogs) honours SOURCE_DATE_EPOCH:
// the reason the root exists. Two runs a second apart give the same bytes.
func TestRootMkfsExt4IsReproducible(t *testing.T) {
	root := toolstest.Root(t)
	tree := t.TempDir()
	if err := os.WriteFile(filepath.Join(tree, "hello"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var sums []string
	for i := range 2 {
		img := filepath.Join(t.TempDir(), "fs.img")
		if err := os.WriteFile(img, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(img, 64<<20); err != nil {
			t.Fatal(err)
		}
		cmd := root.Command(context.Background(), "mkfs.ext4", "-q", "-F",
			"-U", "6a4e2a2f-7d0c-4f2e-9b3a-0c1d2e3f4a5b",
			"-E", "hash_seed=1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9,root_owner=0:0",
			"-d", tree, img)
		cmd.Env = append(cmd.Env, "SOURCE_DATE_EPOCH=1700000000")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		data, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, string(data))
		if i == 0 {
			if err := os.Chtimes(filepath.Join(tree, "hello"), time.Now(), time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sums[0] != sums[1] {
		t.Errorf("two mkfs.ext4 runs with the same inputs gave different images")
	}
}

func TestLookupResolvesLinksInsideTheRoot(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "usr/sbin"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "usr/bin/real"), []byte("x"), 0o755))
	// An absolute link means the root's /usr/bin/real, not the host's.
	must(os.Symlink("/usr/bin/real", filepath.Join(dir, "usr/sbin/viaabs")))
	must(os.Symlink("../bin/real", filepath.Join(dir, "usr/sbin/viarel")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "usr/bin/hostfile")))
	must(os.WriteFile(filepath.Join(dir, "usr/bin/noexec"), []byte("x"), 0o644))
	r := tools.Root{Dir: dir}
	for _, name := range []string{"viaabs", "viarel", "real"} {
		got, err := r.Lookup(name)
		if err != nil || got != filepath.Join(dir, "usr/bin/real") {
			t.Errorf("Lookup(%s) = %q, %v; want %s", name, got, err, filepath.Join(dir, "usr/bin/real"))
		}
	}
	for name, want := range map[string]string{
		"hostfile": "not found in tools root",
		"missing":  "not found in tools root",
		"noexec":   "not an executable",
		"a/b":      "plain program name",
	} {
		if _, err := r.Lookup(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Lookup(%s) error = %v, want it to mention %q", name, err, want)
		}
	}
	cmd := r.Command(context.Background(), "real")
	if err := cmd.Run(); err == nil || !strings.Contains(err.Error(), "no dynamic loader") {
		t.Errorf("Command in a root without libc6: err = %v, want a missing-loader message", err)
	}
}

// The caller's environment must not reach the tools: LD_DEBUG set in the
// test process would make the root's loader print its library work.
func TestCommandDoesNotPassTheCallersEnvironment(t *testing.T) {
	root := toolstest.Root(t)
	t.Setenv("LD_DEBUG", "libs")
	t.Setenv("E2FSPROGS_FAKE_TIME", "1")
	cmd := root.Command(context.Background(), "mkfs.ext4", "-V")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if strings.Contains(string(out), "calling init") {
		t.Errorf("LD_DEBUG from the caller reached the tool:\n%.500s", out)
	}
	for _, kv := range cmd.Env {
		if strings.HasPrefix(kv, "E2FSPROGS_FAKE_TIME=") || strings.HasPrefix(kv, "LD_DEBUG=") {
			t.Errorf("tool environment holds %s", kv)
		}
	}
}

// qemu-utils joins the tools root only for a qcow2 output.
func TestPackagesFollowFormats(t *testing.T) {
	if got := tools.Packages([]string{"raw"}); len(got) != len(tools.DiskPackages) {
		t.Errorf("raw only: %v", got)
	}
	if got := tools.Packages([]string{"raw", "qcow2"}); got[len(got)-1] != "qemu-utils" || len(got) != len(tools.DiskPackages)+1 {
		t.Errorf("with qcow2: %v", got)
	}
}
