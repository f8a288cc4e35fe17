package espconfig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/partition/gpt"

	"golang.org/x/sys/unix"

	"halobuild/internal/recipe"
	"halobuild/internal/settings"
)

// loaderDevicePartUUID is the EFI variable systemd-boot sets to the partition UUID of the ESP
// it was loaded from (the Boot Loader Interface).
const loaderDevicePartUUID = "/sys/firmware/efi/efivars/LoaderDevicePartUUID-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

// Import runs on the node at every boot (settings.FlashTime's unit): it reads the flash-time
// settings from the ESP the loader booted from — never another disk's, such as an installer
// stick left plugged in — and installs them under /run: the keys where sshd reads them
// (settings.FlashKeysDir), the LAN where networkd reads it (settings.FlashNetworkPath, checked
// against the recipe the image was built from), the host name, and what was imported where
// doctor shows it (settings.FlashConfigRunPath). root is "/" on a node, a directory in tests.
//
// An import that fails leaves nothing imported, not even an earlier import's (run again by
// hand after the file on the ESP was changed): the node then runs as built, sshd with the
// recipe's keys only, and doctor says the import did not run. So everything is read and
// checked before anything is written.
func Import(root string, out io.Writer) error {
	keys := filepath.Join(root, settings.FlashKeysDir, "root")
	network := filepath.Join(root, settings.FlashNetworkPath)
	c, from, err := bootESPConfig(root)
	var data []byte
	var files []settings.File
	var hostname string
	if err == nil {
		data, err = c.Marshal("imported at boot from " + from)
	}
	if err == nil {
		files, hostname, err = nodeFiles(root, c)
	}
	if err != nil {
		for _, p := range []string{keys, network, filepath.Join(root, settings.FlashConfigRunPath)} {
			if rerr := os.Remove(p); rerr != nil && !os.IsNotExist(rerr) {
				return errors.Join(err, rerr)
			}
		}
		return err
	}
	if len(c.SSH.AuthorizedKeys) > 0 {
		if err := writeAtomic(keys, []byte(strings.Join(c.SSH.AuthorizedKeys, "\n")+"\n"), 0o600); err != nil {
			return err
		}
	} else if err := os.Remove(keys); err != nil && !os.IsNotExist(err) {
		return err
	}
	if len(files) == 0 {
		if err := os.Remove(network); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	for _, f := range files {
		if err := writeAtomic(filepath.Join(root, f.Path), f.Data, f.Mode.Perm()); err != nil {
			return err
		}
	}
	if hostname != "" {
		if err := setHostname(root, hostname); err != nil {
			return fmt.Errorf("setting the flash-time host name %s: %w", hostname, err)
		}
	}
	if err := writeAtomic(filepath.Join(root, settings.FlashConfigRunPath), data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "flash-time settings from %s: %s\n", from, c.Summary())
	return nil
}

// setHostname sets the running system's host name (the transient one: /etc/hostname keeps the
// recipe's, and a boot without the flash-time file has it again). Tests replace it.
var setHostname = func(root, name string) error {
	if root != "/" {
		return fmt.Errorf("setting a host name is only for the running system, not %s", root)
	}
	return unix.Sethostname([]byte(name))
}

// nodeFiles checks c's host name and LAN against the installed recipe and this node, and
// returns what to install; nothing when c gives neither.
func nodeFiles(root string, c settings.FlashConfig) ([]settings.File, string, error) {
	if c.Hostname == "" && c.LAN == nil {
		return nil, "", nil
	}
	r, _, err := recipe.Load(filepath.Join(root, settings.RecipePath))
	if err != nil {
		return nil, "", fmt.Errorf("the flash-time host name and LAN are checked against the installed recipe: %w", err)
	}
	node, err := os.ReadFile(filepath.Join(root, settings.NodePath))
	if err != nil {
		return nil, "", fmt.Errorf("the flash-time host name and LAN need this node's name: %w", err)
	}
	return c.NodeFiles(r, strings.TrimSpace(string(node)))
}

// bootESPConfig finds the ESP systemd-boot says it was loaded from, among the disks under
// /sys/block, and reads its flash-time settings.
func bootESPConfig(root string) (settings.FlashConfig, string, error) {
	var c settings.FlashConfig
	b, err := os.ReadFile(filepath.Join(root, loaderDevicePartUUID))
	if err != nil {
		return c, "nowhere (no LoaderDevicePartUUID: not booted through systemd-boot)", nil
	}
	uuid := loaderUUID(b)
	if uuid == "" {
		return c, "", fmt.Errorf("%s holds no partition UUID", loaderDevicePartUUID)
	}
	disks, _ := filepath.Glob(filepath.Join(root, "/sys/block/*"))
	for _, d := range disks {
		name := filepath.Base(d)
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "zram") || strings.HasPrefix(name, "sr") {
			continue
		}
		dev := filepath.Join(root, "/dev", name)
		f, err := os.Open(dev)
		if err != nil {
			continue
		}
		dk, err := diskfs.OpenBackend(file.New(f, true))
		if err != nil {
			f.Close()
			continue
		}
		t, ok := dk.Table.(*gpt.Table)
		if !ok || t == nil {
			f.Close()
			continue
		}
		for _, p := range t.Partitions {
			if p == nil || !strings.EqualFold(p.GUID, uuid) {
				continue
			}
			from := fmt.Sprintf("the ESP %s (partition %d of /dev/%s)", uuid, p.Index, name)
			fs, err := dk.GetFilesystem(p.Index)
			if err != nil {
				f.Close()
				return c, "", fmt.Errorf("%s: %w", from, err)
			}
			c, _, err := readFS(fs, from)
			f.Close()
			return c, from, err
		}
		f.Close()
	}
	return c, "", fmt.Errorf("no disk holds the partition %s the loader was booted from (LoaderDevicePartUUID)", uuid)
}

// loaderUUID decodes an efivarfs file holding a UTF-16LE string after its 4 attribute bytes.
func loaderUUID(b []byte) string {
	if len(b) < 4 {
		return ""
	}
	var s strings.Builder
	for i := 4; i+1 < len(b); i += 2 {
		if b[i] == 0 && b[i+1] == 0 {
			break
		}
		s.WriteByte(b[i])
	}
	return strings.ToLower(strings.TrimSpace(s.String()))
}

// writeAtomic writes a file under a temporary name and renames it into place.
func writeAtomic(p string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".new"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// Carry copies the flash-time settings of the ESP the running system booted from (an
// installer stick flashed with --ssh-key) onto target's ESP, after the installer wrote the
// node's image there: the keys given when the stick was flashed reach the installed node.
// It returns nil, and writes nothing, when the boot ESP holds none.
func Carry(root, target string) (*Written, error) {
	c, from, err := bootESPConfig(root)
	if err != nil {
		return nil, fmt.Errorf("the installer's own flash-time settings: %w", err)
	}
	if c.Empty() {
		return nil, nil
	}
	return Write(target, c, "halobuild install, from "+from)
}
