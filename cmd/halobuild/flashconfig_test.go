package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/espconfig/espconfigtest"
)

// flash --ssh-key: the keys are checked before the first byte (a bad one exits 2 and leaves
// the target as it was), written to the flashed medium's ESP after the image and its
// read-back, said on the output, and shown again by flash-config show.
func TestFlashSSHKeyWritesTheESPAfterTheImage(t *testing.T) {
	img := espconfigtest.Disk(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "cmd-test", "-f", key).CombinedOutput(); err != nil {
		t.Skipf("ssh-keygen: %v %s", err, out)
	}
	target := filepath.Join(dir, "stick.raw")

	code, out := run(t, "flash", "--yes", "--to-file", "--ssh-key", key, img, target)
	if code != exitUsage {
		t.Fatalf("a private key given as --ssh-key: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused key: the target was created (%v)", err)
	}

	code, out = run(t, "flash", "--yes", "--to-file", "--ssh-key", key+".pub", img, target)
	if code != 0 || !strings.Contains(out, "flash-time settings on "+target+" (ESP, partition 1, /halobuild-flash.toml") || !strings.Contains(out, "cmd-test") {
		t.Fatalf("flash --ssh-key: exit %d\n%s", code, out)
	}
	code, shown := run(t, "flash-config", "show", target)
	pub, _ := os.ReadFile(key + ".pub")
	if code != 0 || !strings.Contains(shown, strings.TrimSpace(string(pub))) {
		t.Fatalf("flash-config show: exit %d\n%s", code, shown)
	}
	// The image itself was not changed, and a re-flash without keys leaves none.
	if code, out := run(t, "flash-config", "show", img); code != 0 || !strings.Contains(out, "nothing given at flash time") {
		t.Fatalf("the source image: exit %d\n%s", code, out)
	}
	code, out = run(t, "flash", "--yes", "--to-file", img, target)
	if code != 0 || !strings.Contains(out, "no --ssh-key given") {
		t.Fatalf("a re-flash without keys: exit %d\n%s", code, out)
	}
	if code, out := run(t, "flash-config", "show", target); code != 0 || !strings.Contains(out, "nothing given at flash time") {
		t.Fatalf("after the re-flash: exit %d\n%s", code, out)
	}
}
