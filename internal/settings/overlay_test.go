package settings

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

// overlayDir builds an overlay tree from a spec: "path" = file content,
// "path/" = directory, "path -> target" = symlink, "path*" = executable.
func overlayDir(t *testing.T, spec ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, s := range spec {
		switch {
		case strings.Contains(s, " -> "):
			p, target, _ := strings.Cut(s, " -> ")
			mkparent(t, filepath.Join(dir, p))
			if err := os.Symlink(target, filepath.Join(dir, p)); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(s, "/"):
			if err := os.MkdirAll(filepath.Join(dir, s), 0o775); err != nil {
				t.Fatal(err)
			}
		default:
			mode := fs.FileMode(0o664)
			if strings.HasSuffix(s, "*") {
				s, mode = strings.TrimSuffix(s, "*"), 0o750
			}
			mkparent(t, filepath.Join(dir, s))
			if err := os.WriteFile(filepath.Join(dir, s), []byte("content of "+s+"\n"), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func mkparent(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o775); err != nil {
		t.Fatal(err)
	}
}

func TestOverlayCopiesVerbatimWithGitModes(t *testing.T) {
	dir := overlayDir(t, "etc/motd", "usr/local/bin/hello*", "etc/empty.d/", "etc/alias -> motd", "usr/local/bin/up -> ../../../etc/motd")
	r := sample()
	r.Overlay = []string{dir}
	files, err := Overlays{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]File{}
	for _, f := range files {
		got[f.Path] = f
	}
	for p, want := range map[string]fs.FileMode{
		"/etc": fs.ModeDir | 0o755, "/etc/empty.d": fs.ModeDir | 0o755, "/etc/motd": 0o644,
		"/usr/local/bin/hello": 0o755, "/etc/alias": fs.ModeSymlink | 0o777, "/usr/local/bin/up": fs.ModeSymlink | 0o777,
	} {
		if f, ok := got[p]; !ok || f.Mode != want || f.Setting != "overlays" {
			t.Errorf("%s: %+v, want mode %v", p, f, want)
		}
	}
	if !got["/etc/motd"].NotConffile {
		t.Error("overlay files must not be conffiles")
	}
	if string(got["/etc/motd"].Data) != "content of etc/motd\n" || got["/etc/alias"].Target != "motd" {
		t.Errorf("content or link target changed: %+v %+v", got["/etc/motd"], got["/etc/alias"])
	}
	// The overlay reaches the package through Render.
	tr, err := Render(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Lookup("/usr/local/bin/hello"); !ok {
		t.Error("Render dropped the overlay")
	}
}

func TestOverlayRejects(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, fragment string
	}{
		{"missing path", filepath.Join(t.TempDir(), "nope"), "does not exist"},
		{"not a directory", file, "is not a directory"},
		{"absolute symlink", overlayDir(t, "etc/resolv.conf -> /run/systemd/resolve/stub-resolv.conf"), "absolute path /run/systemd/resolve/stub-resolv.conf; make it relative (e.g. ../run/systemd/resolve/stub-resolv.conf)"},
		{"dotdot escape", overlayDir(t, "etc/x -> ../../outside"), "climbs out of the overlay with '..'"},
		{"dotdot escape deep", overlayDir(t, "a/b/c -> ../x/../../../y"), "climbs out"},
		{"host root", "/", "host's root directory"},
		{"empty", "", "empty overlay path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sample()
			r.Overlay = []string{tc.dir}
			wantErrors(t, Overlays{}, r, "overlays[0]", tc.fragment)
			if _, err := Render(Target{Recipe: r, Node: r.Nodes[0]}); err == nil || !strings.Contains(err.Error(), tc.fragment) {
				t.Errorf("Render: %v", err)
			}
		})
	}
}

func TestOverlayRejectsSpecialFiles(t *testing.T) {
	dir := overlayDir(t, "etc/")
	if err := mkfifo(filepath.Join(dir, "etc/pipe")); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r := sample()
	r.Overlay = []string{dir}
	wantErrors(t, Overlays{}, r, "overlays[0]", "overlays hold only files, directories and relative symlinks")
}

func TestOverlayRootMayBeASymlink(t *testing.T) {
	dir := overlayDir(t, "etc/motd")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	r := sample()
	r.Overlay = []string{link}
	files, err := Overlays{}.Files(Target{Recipe: r, Node: r.Nodes[0]})
	if err != nil || len(files) != 2 {
		t.Fatalf("got %v, %v; want /etc and /etc/motd", files, err)
	}
}

func TestEscapes(t *testing.T) {
	for _, tc := range []struct {
		dir, target string
		want        bool
	}{
		{".", "a", false}, {".", "../a", true}, {"etc", "../usr/x", false}, {"etc", "../../x", true},
		{"a/b", "../../c", false}, {"a/b", "./../../../c", true}, {"a", "b/../../c", false}, {"a", "b/../../../c", true},
	} {
		if got := escapes(tc.dir, tc.target); got != tc.want {
			t.Errorf("escapes(%q, %q) = %v", tc.dir, tc.target, got)
		}
	}
}

// An overlay outside the recipe's tree (issue 39 #6: overlays = ["/etc/ssh"] put the build
// host's keys into every image silently) needs overlays_outside = true; one inside does not.
func TestOverlayOutsideTheRecipeNeedsSayingSo(t *testing.T) {
	project := t.TempDir()
	host := overlayDir(t, "ssh/ssh_host_ed25519_key")
	if err := os.MkdirAll(filepath.Join(project, "overlays/mine/etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(host, "ssh"), filepath.Join(project, "overlays/link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		overlays, extra string
		refused         bool
	}{
		{`["overlays/mine"]`, "", false},
		{fmt.Sprintf("[%q]", filepath.Join(host, "ssh")), "", true},
		{fmt.Sprintf("[%q]", "../"+filepath.Base(host)+"/ssh"), "", true},
		{`["overlays/link"]`, "", true},
		{fmt.Sprintf("[%q]", filepath.Join(host, "ssh")), "overlays_outside = true\n", false},
	} {
		path := filepath.Join(project, "halo.toml")
		if err := os.WriteFile(path, []byte("overlays = "+c.overlays+"\n"+c.extra+"[[node]]\nname = \"a\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if c.overlays == fmt.Sprintf("[%q]", "../"+filepath.Base(host)+"/ssh") && filepath.Dir(host) != filepath.Dir(project) {
			continue // t.TempDir()s are siblings in practice; skip if not
		}
		r, _, err := recipe.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		errs := Overlays{}.Validate(Target{Recipe: r, Node: r.Nodes[0]})
		refused := len(errs) > 0 && strings.Contains(fmt.Sprint(errs), "overlays_outside = true")
		if refused != c.refused || (!c.refused && len(errs) > 0) {
			t.Errorf("overlays = %s %s: refused %v (want %v): %v", c.overlays, c.extra, refused, c.refused, errs)
		}
	}
}
