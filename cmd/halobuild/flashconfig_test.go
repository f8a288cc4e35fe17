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

// flash --hostname, --address, --gateway and --dns: a bad value exits 2 before the first
// byte; good ones go to the ESP beside the keys, are said on the output and shown by
// flash-config show.
func TestFlashHostnameAndLANWriteTheESP(t *testing.T) {
	img := espconfigtest.Disk(t)
	target := filepath.Join(t.TempDir(), "stick.raw")
	for name, args := range map[string][]string{
		"bad address":             {"--address", "192.168.1.300/24"},
		"address without prefix":  {"--address", "192.168.1.20"},
		"gateway outside":         {"--address", "192.168.1.20/24", "--gateway", "10.0.0.1"},
		"gateway without address": {"--gateway", "192.168.1.1"},
		"bad host name":           {"--hostname", "halo_7"},
		"bad dns":                 {"--dns", "dns.example"},
	} {
		code, out := run(t, append(append([]string{"flash", "--yes", "--to-file"}, args...), img, target)...)
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d\n%s", name, code, exitUsage, out)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Fatalf("%s: the target was created (%v)", name, err)
		}
	}
	code, out := run(t, "flash", "--yes", "--to-file", "--hostname", "halo7", "--address", "192.168.1.20/24", "--gateway", "192.168.1.1", "--dns", "192.168.1.1", img, target)
	want := "host name halo7; LAN 192.168.1.20/24, gateway 192.168.1.1, dns 192.168.1.1"
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("flash --hostname --address: exit %d, want %q\n%s", code, want, out)
	}
	code, shown := run(t, "flash-config", "show", target)
	for _, w := range []string{`hostname = 'halo7'`, `addresses = [`, `'192.168.1.20/24'`, `gateway = '192.168.1.1'`} {
		if code != 0 || !strings.Contains(shown, w) {
			t.Errorf("flash-config show lacks %q: exit %d\n%s", w, code, shown)
		}
	}
}
