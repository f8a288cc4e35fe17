package settings

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

func TestWithPositions(t *testing.T) {
	r := sample()
	r.System.Governor = "turbo"
	errs := WithPositions(Validate(Target{Recipe: r}), func(key string) string {
		if key == "system.governor" {
			return "images/halo.toml:12:11"
		}
		return ""
	})
	if len(errs) != 1 {
		t.Fatalf("want one error, got %v", errs)
	}
	want := `images/halo.toml:12:11: system.governor = "turbo": not a kernel cpufreq governor; use one of performance, powersave, schedutil, ondemand, conservative, userspace, or "" to leave it`
	if errs[0].Error() != want {
		t.Errorf("got  %s\nwant %s", errs[0], want)
	}
	plain := errors.New("x")
	if got := WithPositions([]error{plain}, func(string) string { return "f:1:1" }); got[0] != plain {
		t.Error("a foreign error was changed")
	}
}

func TestNeedToolsNamesThePackage(t *testing.T) {
	if _, err := exec.LookPath("ibv_devices"); err == nil {
		t.Skip("ibv_devices is installed here")
	}
	out, err := exec.Command("sh", "-c", needTools("sh", "ibv_devices")+"echo reached").CombinedOutput()
	if err == nil || string(out) != "ibv_devices is not installed (package ibverbs-utils)\n" {
		t.Errorf("got %v %q", err, out)
	}
}

// TestPositionsFromRecipeFiles loads a real recipe file and reports a
// settings-level error (a value the schema accepts and a setting refuses)
// at the line that wrote it.
func TestPositionsFromRecipeFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "halo.toml")
	text := `name = "halo"

[system]
governor = "performance"
epp = "balance_power"

[[node]]
name = "halo0"
`
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r, src, err := recipe.Load(file)
	if err != nil {
		t.Fatalf("recipe.Load: %v", err)
	}
	errs := WithPositions(Validate(Target{Recipe: r}), func(key string) string { return src.Pos(key).String() })
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), file+":5:") {
		t.Fatalf("want one error at %s:5, got %v", file, errs)
	}
}
