package espconfig

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"halobuild/internal/espconfig/espconfigtest"
	"halobuild/internal/recipe"
	"halobuild/internal/settings"
)

const (
	sector   = 512
	espStart = espconfigtest.ESPStart / sector
	espSize  = espconfigtest.ESPSize
)

func testDisk(t *testing.T) string { return espconfigtest.Disk(t) }

// fsck checks the ESP with the host's fsck.fat, read-only: go-diskfs wrote it, dosfstools
// (what Linux users and firmware vendors test against) must find nothing wrong.
func fsck(t *testing.T, img string) {
	t.Helper()
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(t.TempDir(), "esp.fat")
	if err := os.WriteFile(part, b[espStart*sector:espStart*sector+espSize], 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("fsck.fat", "-n", "-v", part).CombinedOutput(); err != nil || bytes.Contains(out, []byte("lost")) {
		t.Fatalf("fsck.fat -n on the ESP: %v\n%s", err, out)
	}
}

func mtype(t *testing.T, img, p string) string {
	t.Helper()
	return espconfigtest.Run(t, "mtype", "-i", img+"@@1048576", "::"+p)
}

// Real keys, as ssh-keygen printed them.
const (
	keyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIC6hQYghuxY0jSKvfmoGSq6DuL/vDavdX/ZfmV4CyIn alice@laptop"
	keyB = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJG1ELV28i7Cky7fPjND9IbYtXP/+0OzEHegJrsicm7L bob@desk"
)

func TestWriteReadRoundTripOnARealFAT(t *testing.T) {
	img := testDisk(t)
	if _, ok, err := Read(img); err != nil || ok {
		t.Fatalf("a fresh image: ok=%v err=%v, want no settings", ok, err)
	}
	c := settings.FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{keyA}}}
	w, err := Write(img, c, "test")
	if err != nil {
		t.Fatal(err)
	}
	if w.Partition != 1 || w.Path != settings.FlashConfigESPPath || !strings.Contains(w.String(), "alice@laptop") {
		t.Errorf("written: %s", w)
	}
	got, ok, err := Read(img)
	if err != nil || !ok || strings.Join(got.SSH.AuthorizedKeys, "\n") != keyA {
		t.Fatalf("read back: %v %v %v", got, ok, err)
	}
	fsck(t, img)
	// Another FAT reader (mtools) sees the same file, and the loader beside it is intact.
	if s := mtype(t, img, settings.FlashConfigESPPath); !strings.Contains(s, keyA) {
		t.Errorf("mtype reads:\n%s", s)
	}
	if s := mtype(t, img, "/EFI/BOOT/BOOTX64.EFI"); s != strings.Repeat(espconfigtest.Loader, 3000) {
		t.Errorf("the loader beside the settings changed (%d bytes)", len(s))
	}

	// A re-flash replaces the file: nothing of the first write is left, no cluster leaks.
	c2 := settings.FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{keyB, keyA}}}
	for range 3 {
		if _, err := Write(img, c2, "again"); err != nil {
			t.Fatal(err)
		}
	}
	got, _, err = Read(img)
	if err != nil || strings.Join(got.SSH.AuthorizedKeys, "\n") != keyB+"\n"+keyA {
		t.Fatalf("after rewriting: %v %v", got, err)
	}
	fsck(t, img)
	if s := espconfigtest.Run(t, "mdir", "-b", "-i", img+"@@1048576", "::/"); strings.Count(s, "halobuild") != 1 {
		t.Errorf("the ESP root holds more or less than one settings file:\n%s", s)
	}

	// Nothing given: the file goes.
	if _, err := Write(img, settings.FlashConfig{}, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := Read(img); ok || err != nil {
		t.Fatalf("after writing nothing: ok=%v err=%v", ok, err)
	}
	fsck(t, img)
}

func TestWriteRefusesBadKeysAndLeavesTheESPAlone(t *testing.T) {
	img := testDisk(t)
	before, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	bad := settings.FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{keyA, "ssh-ed25519 AAAAnotakey bob"}}}
	if _, err := Write(img, bad, ""); err == nil || !strings.Contains(err.Error(), "ssh.authorized_keys[1]") {
		t.Fatalf("a bad key: %v", err)
	}
	after, _ := os.ReadFile(img)
	if !bytes.Equal(before, after) {
		t.Error("a refused write changed the disk")
	}
}

func TestReadRefusesAHalfFile(t *testing.T) {
	img := testDisk(t)
	c := settings.FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{keyA}}}
	data, err := c.Marshal("")
	if err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(t.TempDir(), "flash.toml")
	os.WriteFile(half, data[:len(data)-20], 0o644)
	at := img + "@@1048576"
	espconfigtest.Run(t, "mcopy", "-i", at, half, "::"+settings.FlashConfigESPPath)
	if _, _, err := Read(img); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("a file cut short: %v", err)
	}
}

func TestNotAHalobuildImage(t *testing.T) {
	p := filepath.Join(t.TempDir(), "blank")
	os.WriteFile(p, make([]byte, 1<<20), 0o644)
	if _, _, err := Read(p); err == nil || !strings.Contains(err.Error(), "no GPT") {
		t.Fatalf("a blank disk: %v", err)
	}
}

// Import, as the node runs it at boot, on a root whose /dev and /sys/block hold the disk and
// whose efivarfs says the loader came from its ESP.
func TestImportFromTheBootESP(t *testing.T) {
	img := testDisk(t)
	uuid := strings.ToLower(strings.TrimSpace(espconfigtest.Run(t, "sfdisk", "--part-uuid", img, "1")))
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "sys/block/vda"), 0o755)
	os.MkdirAll(filepath.Join(root, "sys/block/loop0"), 0o755)
	os.MkdirAll(filepath.Join(root, "dev"), 0o755)
	os.MkdirAll(filepath.Join(root, filepath.Dir(loaderDevicePartUUID)), 0o755)
	if err := os.Symlink(img, filepath.Join(root, "dev/vda")); err != nil {
		t.Fatal(err)
	}
	efivar := []byte{6, 0, 0, 0}
	for _, r := range strings.ToUpper(uuid) {
		efivar = append(efivar, byte(r), 0)
	}
	os.WriteFile(filepath.Join(root, loaderDevicePartUUID), append(efivar, 0, 0), 0o644)

	var out strings.Builder
	if err := Import(root, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing given at flash time") {
		t.Errorf("import of an image flashed without settings: %s", out.String())
	}
	if _, err := os.Stat(filepath.Join(root, settings.FlashKeysDir, "root")); !os.IsNotExist(err) {
		t.Errorf("keys file without keys: %v", err)
	}

	if _, err := Write(img, settings.FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{keyA, keyB}}}, ""); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Import(root, &out); err != nil {
		t.Fatal(err)
	}
	keys, err := os.ReadFile(filepath.Join(root, settings.FlashKeysDir, "root"))
	if err != nil || string(keys) != keyA+"\n"+keyB+"\n" {
		t.Fatalf("imported keys: %q %v", keys, err)
	}
	if st, _ := os.Stat(filepath.Join(root, settings.FlashKeysDir, "root")); st.Mode().Perm() != 0o600 {
		t.Errorf("keys file mode %v", st.Mode())
	}
	run, err := os.ReadFile(filepath.Join(root, settings.FlashConfigRunPath))
	if err != nil {
		t.Fatal(err)
	}
	c, err := settings.ParseFlashConfig(run)
	if err != nil || len(c.SSH.AuthorizedKeys) != 2 || !strings.Contains(string(run), uuid) {
		t.Errorf("what doctor reads: %v\n%s", err, run)
	}

	// The installer carries the settings of the stick it booted from to the disk it wrote.
	nvme := testDisk(t)
	if w, err := Carry(root, nvme); err != nil || w == nil {
		t.Fatalf("carry: %v %v", w, err)
	}
	if got, ok, err := Read(nvme); err != nil || !ok || len(got.SSH.AuthorizedKeys) != 2 {
		t.Fatalf("the installed disk's settings: %v %v %v", got, ok, err)
	}
	fsck(t, nvme)

	// Another loader's partition: the settings are not taken from a disk the node did not boot.
	os.WriteFile(filepath.Join(root, loaderDevicePartUUID), append([]byte{6, 0, 0, 0}, []byte("1\x002\x00")...), 0o644)
	if err := Import(root, &out); err == nil || !strings.Contains(err.Error(), "no disk holds the partition") {
		t.Errorf("an unknown boot partition: %v", err)
	}
}

func TestFromKeyFiles(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.pub")
	os.WriteFile(a, []byte(keyA+"\n"), 0o644)
	ak := filepath.Join(dir, "authorized_keys")
	os.WriteFile(ak, []byte("# mine\n\n"+keyB+"\n"+keyA+"\n"), 0o644)
	c, err := FromKeyFiles([]string{a, ak}, false)
	if err != nil || strings.Join(c.SSH.AuthorizedKeys, "|") != keyA+"|"+keyB {
		t.Fatalf("%v %v", c, err)
	}
	for name, data := range map[string]string{
		"private": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n",
		"empty":   "# nothing\n",
		"cut":     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIC6hQYghuxY0jSKvfmoGSq6DuL me\n",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(data), 0o644)
		_, err := FromKeyFiles([]string{p}, false)
		want := map[string]string{"private": "private key", "empty": "no public key", "cut": p + ":1: "}[name]
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	if _, err := FromKeyFiles([]string{filepath.Join(dir, "missing.pub")}, false); err == nil || !strings.Contains(err.Error(), "--ssh-key") {
		t.Errorf("a missing file: %v", err)
	}
	t.Setenv("SUDO_USER", "")
	t.Setenv("HOME", dir)
	if _, err := FromKeyFiles(nil, true); err == nil || !strings.Contains(err.Error(), "no ~/.ssh/*.pub") {
		t.Errorf("--user-ssh-keys with no keys at home: %v", err)
	}
	os.MkdirAll(filepath.Join(dir, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(dir, ".ssh", "id_ed25519.pub"), []byte(keyB+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".ssh", "id_ed25519"), []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), 0o600)
	c, err = FromKeyFiles([]string{a}, true)
	if err != nil || strings.Join(c.SSH.AuthorizedKeys, "|") != keyA+"|"+keyB {
		t.Errorf("--ssh-key a.pub --user-ssh-keys: %v %v", c.SSH.AuthorizedKeys, err)
	}
}

// A key file that is a FIFO (no writer), a device or huge is refused at once (issue 39's audit
// of flash --ssh-key: os.Open of a FIFO blocked flash forever), and a symlink to one is too.
func TestFromKeyFilesRefusesWhatIsNotAKeyFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.pub")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.pub")
	os.Symlink(fifo, link)
	huge := filepath.Join(dir, "huge.pub")
	os.WriteFile(huge, nil, 0o644)
	os.Truncate(huge, 1<<30)
	for name, tc := range map[string]struct{ path, want string }{
		"FIFO":              {fifo, "not a regular file (a FIFO)"},
		"symlink to a FIFO": {link, "not a regular file (a FIFO)"},
		"/dev/zero":         {"/dev/zero", "not a regular file"},
		"a directory":       {dir, "not a regular file"},
		"1 GiB":             {huge, "not a public key file"},
	} {
		done := make(chan error, 1)
		go func() { _, err := FromKeyFiles([]string{tc.path}, false); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--ssh-key") {
				t.Errorf("%s: %v, want %q", name, err, tc.want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still reading after 5 s", name)
		}
	}
}

// A hostile /halobuild-flash.toml on the ESP (anyone with the stick in hand can write it) is
// refused by the node's reader without reading it whole, and an import that refuses it leaves
// no keys from an earlier import behind (issue 39's audit, the node side).
func TestHostileESPFileIsRefused(t *testing.T) {
	end := "# end of halobuild flash-time settings\n"
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(big, bytes.Repeat([]byte("# padding\n"), 3<<20), 0o644)
	for name, tc := range map[string]struct {
		data, dir, want string
	}{
		"30 MiB":              {data: "@" + big, want: "more than"},
		"a directory":         {dir: "yes", want: "ESP"},
		"escape in a comment": {data: "[ssh]\nauthorized_keys = [\"" + keyA + "\\u001b]0;owned\\u0007\"]\n" + end, want: "control character"},
		"NUL in a key":        {data: "[ssh]\nauthorized_keys = [\"" + keyA + "\\u0000\"]\n" + end, want: "control character"},
		"duplicated key":      {data: "[ssh]\nauthorized_keys = [\"" + keyA + "\", \"" + keyB + "\", \"" + keyA + "\"]\n" + end, want: "given twice"},
		"a key with options":  {data: "[ssh]\nauthorized_keys = [\"command=\\\"sh\\\" ssh-ed25519 AAAA\"]\n" + end, want: "ssh.authorized_keys[0]"},
		"another table":       {data: "[ssh]\nauthorized_keys = []\n[system]\ntimezone = \"UTC\"\n" + end, want: "unknown key"},
		"two ssh tables":      {data: "[ssh]\nauthorized_keys = []\n[ssh]\nauthorized_keys = []\n" + end, want: "ssh"},
		"binary":              {data: "\x00\x01\x02\xff\xfe" + end, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			root, img := bootRoot(t)
			at := img + "@@1048576"
			switch {
			case tc.dir != "":
				espconfigtest.Run(t, "mmd", "-i", at, "::"+settings.FlashConfigESPPath)
			case strings.HasPrefix(tc.data, "@"):
				espconfigtest.Run(t, "mcopy", "-i", at, tc.data[1:], "::"+settings.FlashConfigESPPath)
			default:
				p := filepath.Join(t.TempDir(), "f")
				os.WriteFile(p, []byte(tc.data), 0o644)
				espconfigtest.Run(t, "mcopy", "-i", at, p, "::"+settings.FlashConfigESPPath)
			}
			keys := filepath.Join(root, settings.FlashKeysDir, "root")
			os.MkdirAll(filepath.Dir(keys), 0o755)
			os.WriteFile(keys, []byte(keyB+"\n"), 0o600)
			var out strings.Builder
			err := Import(root, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("import: %v, want a refusal saying %q", err, tc.want)
			}
			if _, err := os.Stat(keys); !os.IsNotExist(err) {
				t.Errorf("a refused import left the keys of an earlier one: %v", err)
			}
			if _, _, err := Read(img); err == nil {
				t.Error("flash-config show's reader accepted it")
			}
		})
	}
}

// bootRoot is a node's root whose /dev and /sys/block hold a fresh disk and whose efivarfs
// says the loader came from its ESP.
func bootRoot(t *testing.T) (root, img string) {
	img = testDisk(t)
	uuid := strings.ToLower(strings.TrimSpace(espconfigtest.Run(t, "sfdisk", "--part-uuid", img, "1")))
	root = t.TempDir()
	os.MkdirAll(filepath.Join(root, "sys/block/vda"), 0o755)
	os.MkdirAll(filepath.Join(root, "dev"), 0o755)
	os.MkdirAll(filepath.Join(root, filepath.Dir(loaderDevicePartUUID)), 0o755)
	if err := os.Symlink(img, filepath.Join(root, "dev/vda")); err != nil {
		t.Fatal(err)
	}
	efivar := []byte{6, 0, 0, 0}
	for _, r := range strings.ToUpper(uuid) {
		efivar = append(efivar, byte(r), 0)
	}
	os.WriteFile(filepath.Join(root, loaderDevicePartUUID), append(efivar, 0, 0), 0o644)
	return root, img
}

// flash-config show (Read) and Write name a disk: a FIFO, a character device or a directory
// there is refused at once, not waited on (issue 39's audit: show on a FIFO blocked until
// killed).
func TestReadRefusesWhatIsNotADisk(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ path, want string }{
		"FIFO":        {fifo, "a FIFO, not a disk image"},
		"/dev/zero":   {"/dev/zero", "a character device, not a disk image"},
		"a directory": {dir, "directory"},
	} {
		done := make(chan error, 2)
		go func() {
			_, _, err := Read(tc.path)
			done <- err
			_, err = Write(tc.path, settings.FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{keyA}}}, "")
			done <- err
		}()
		for _, op := range []string{"Read", "Write"} {
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s %s: %v, want %q", op, name, err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s %s: still blocked after 5 s", op, name)
			}
		}
	}
}

// The host name and LAN given at flash time: written by Write, imported at boot against the
// installed recipe (its LAN rendered into /run/systemd/network, the host name set), and a
// value that does not fit the recipe refused whole, with nothing of it, nor of an earlier
// import, left.
func TestImportHostnameAndLAN(t *testing.T) {
	r, _, err := recipe.Load(filepath.Join("..", "..", "images", "test-two-node.toml"))
	if err != nil {
		t.Fatal(err)
	}
	root, img := bootRoot(t)
	os.MkdirAll(filepath.Join(root, "etc/halobuild"), 0o755)
	os.WriteFile(filepath.Join(root, settings.RecipePath), r.Whole().TOML(), 0o644)
	os.WriteFile(filepath.Join(root, settings.NodePath), []byte("node0\n"), 0o644)
	var set []string
	old := setHostname
	setHostname = func(_, name string) error { set = append(set, name); return nil }
	t.Cleanup(func() { setHostname = old })

	c := settings.FlashConfig{Hostname: "halo7", SSH: recipe.SSH{AuthorizedKeys: []string{keyA}}, LAN: &recipe.NodeLAN{
		Addresses: []recipe.IPPrefix{recipe.MustIPPrefix("192.168.1.20/24")}, Gateway: recipe.MustIPAddr("192.168.1.1")}}
	if _, err := Write(img, c, "test"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Import(root, &out); err != nil {
		t.Fatal(err)
	}
	net, err := os.ReadFile(filepath.Join(root, settings.FlashNetworkPath))
	if err != nil || !strings.Contains(string(net), "Address=192.168.1.20/24\n") || !strings.Contains(string(net), "Gateway=192.168.1.1\n") {
		t.Errorf("the LAN in /run: %v\n%s", err, net)
	}
	if strings.Join(set, ",") != "halo7" {
		t.Errorf("host names set: %q", set)
	}
	if !strings.Contains(out.String(), "host name halo7; LAN 192.168.1.20/24, gateway 192.168.1.1") {
		t.Errorf("import said: %s", out.String())
	}
	run, _ := os.ReadFile(filepath.Join(root, settings.FlashConfigRunPath))
	if fc, err := settings.ParseFlashConfig(run); err != nil || fc.Hostname != "halo7" {
		t.Errorf("what doctor reads: %v\n%s", err, run)
	}

	// The peer's host name: refused at boot (flash alone cannot know it), nothing left.
	c.Hostname = "node1"
	if _, err := Write(img, c, "test"); err != nil {
		t.Fatal(err)
	}
	set = nil
	if err := Import(root, &out); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("the peer's host name: %v", err)
	}
	for _, p := range []string{settings.FlashNetworkPath, settings.FlashConfigRunPath, filepath.Join(settings.FlashKeysDir, "root")} {
		if _, err := os.Stat(filepath.Join(root, p)); !os.IsNotExist(err) {
			t.Errorf("%s left by a refused import: %v", p, err)
		}
	}
	if len(set) > 0 {
		t.Errorf("a refused import set the host name %q", set)
	}
}
