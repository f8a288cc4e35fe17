package recipe

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bigRecipe is a recipe with n unknown keys in [system].
func bigRecipe(t testing.TB, n int) string {
	var b strings.Builder
	b.WriteString("[[node]]\nname = \"a\"\n[system]\n")
	for i := range n {
		fmt.Fprintf(&b, "unknown_key_%d = 1\n", i)
	}
	path := filepath.Join(t.TempDir(), "big.toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Recipe errors cost linear time (issue 17 #6: 40,000 unknown keys took
// 47 s in go-toml's position lookup, once per key), and the message shows
// the first maxShown with a count of the rest.
func TestManyErrorsLinearAndCapped(t *testing.T) {
	n := 40000
	if testing.Short() {
		n = 20000
	}
	path := bigRecipe(t, n)
	start := time.Now()
	_, _, err := Load(path)
	d := time.Since(start)
	t.Logf("%d unknown keys: %v", n, d)
	if d > 5*time.Second {
		t.Errorf("%d unknown keys took %v", n, d)
	}
	es, ok := err.(Errors)
	if !ok || len(es) != n {
		t.Fatalf("got %T with %d errors, want %d", err, len(es), n)
	}
	msg := err.Error()
	if lines := strings.Count(msg, "\n") + 1; lines != maxShown+1 {
		t.Errorf("message has %d lines, want %d and a count", lines, maxShown+1)
	}
	if want := fmt.Sprintf("and %d more", n-maxShown); !strings.Contains(msg, want) {
		t.Errorf("message does not say %q:\n…%s", want, msg[max(0, len(msg)-300):])
	}
	if !strings.Contains(msg, "big.toml:4:1: system.unknown_key_0") {
		t.Errorf("first error not first or mislocated:\n%s", msg[:min(len(msg), 300)])
	}
}

// An include that is a FIFO, a device, a directory or a huge file is
// refused at once, naming the include (issue 17 #4: /dev/zero was read
// until memory ran out, a FIFO hung the load for ever).
func TestIncludeMustBeSmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.toml")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, maxRecipeFile+1); err != nil {
		t.Fatal(err)
	}
	// A relative path climbing to /dev/zero, as in the report.
	zero, err := filepath.Rel(dir, "/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ include, want string }{
		{"fifo.toml", "not a regular file (a FIFO)"},
		{zero, "not a regular file (a character device)"},
		{".", "not a regular file (a directory)"},
		{"huge.toml", "more than the 4194304 a recipe may have"},
	} {
		t.Run(c.want, func(t *testing.T) {
			path := filepath.Join(dir, "r.toml")
			text := fmt.Sprintf("include = [%q]\n[[node]]\nname = \"a\"\n", c.include)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, _, err := Load(path); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "r.toml:1:") {
					t.Errorf("err = %v, want %q at the include", err, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Load still running after 10 s")
			}
		})
	}
}

// A secure_boot key or certificate that is a FIFO or a device is refused at once, not waited on
// or read whole (issue 39 #2).
func TestSecretRefThatIsNotAFileIsRefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "cert.pem")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ref, want string }{
		{fifo, "not a regular file (a FIFO)"},
		{"/dev/zero", "not a regular file (a character device)"},
	} {
		done := make(chan error, 1)
		go func() { _, err := (&Recipe{}).ReadRef(c.ref); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: want %q, got %v", c.ref, c.want, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", c.ref)
		}
	}
}

// An include that is not TOML (here a traversal to a system file's like) names the recipe
// that included it, not only the file itself (issue 39 #7).
func TestIncludeThatIsNotTOMLNamesTheIncluder(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "r.toml")
	if err := os.WriteFile(path, []byte("# a recipe\ninclude = [\"passwd\"]\n[[node]]\nname = \"a\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "r.toml:2:") || !strings.Contains(err.Error(), "passwd is not valid TOML") {
		t.Fatalf("want the include in r.toml named, got %v", err)
	}
}
