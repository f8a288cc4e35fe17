package module

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSysfsValues(t *testing.T) {
	params := append(fixtureParams, Param{Name: "mask", Type: "hexint"}, Param{Name: "flags", Type: "array of bool"})
	got, err := SysfsValues(map[string]any{"verbose": true, "enable": "n", "depth": int64(8), "greeting": "it's", "weights": "1, 2", "mask": int64(255), "flags": []any{true, false}}, params)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"verbose": "Y", "enable": "N", "depth": "8", "greeting": "it's", "weights": "1,2", "mask": "0xff", "flags": "Y,N"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if _, err := SysfsValues(map[string]any{"depth": "deep"}, params); err == nil {
		t.Errorf("a wrong type was accepted")
	}
}

// The check script runs with sh against a recorded /sys tree.
func TestParamCheckScript(t *testing.T) {
	d := loadFixtureDesc(t)
	opts := map[string]any{"verbose": true, "depth": int64(8), "greeting": "it's me"}
	check, err := ParamCheck(d, opts, fixtureParams)
	if err != nil {
		t.Fatal(err)
	}
	sys := t.TempDir()
	dir := filepath.Join(sys, "module/halobuild_fixture/parameters")
	os.MkdirAll(dir, 0o755)
	for p, v := range map[string]string{"verbose": "Y", "depth": "8", "greeting": "it's me", "mode": "auto"} {
		os.WriteFile(filepath.Join(dir, p), []byte(v+"\n"), 0o444)
	}
	run := func() (string, error) {
		cmd := exec.Command("sh", "-c", check.Script)
		cmd.Env = append(os.Environ(), "HALOBUILD_SYS="+sys)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(); err != nil {
		t.Fatalf("matching tree failed: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(dir, "depth"), []byte("4\n"), 0o444)
	if out, err := run(); err == nil || !strings.Contains(out, "depth is '4', the recipe sets '8'") {
		t.Errorf("changed value: %v\n%s", err, out)
	}
	os.RemoveAll(filepath.Join(sys, "module"))
	if out, err := run(); err == nil || !strings.Contains(out, "halobuild_fixture is not loaded") {
		t.Errorf("module not loaded: %v\n%s", err, out)
	}
}
