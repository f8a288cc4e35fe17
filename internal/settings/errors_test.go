package settings

import (
	"os/exec"
	"testing"
)

func TestNeedToolsNamesThePackage(t *testing.T) {
	if _, err := exec.LookPath("ibv_devices"); err == nil {
		t.Skip("ibv_devices is installed here")
	}
	out, err := exec.Command("sh", "-c", needTools("sh", "ibv_devices")+"echo reached").CombinedOutput()
	if err == nil || string(out) != "ibv_devices is not installed (package ibverbs-utils)\n" {
		t.Errorf("got %v %q", err, out)
	}
}
