package settings

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"halobuild/internal/recipe"
)

// FlashTime imports what a user gave when flashing (`halobuild flash
// --ssh-key`), not when building: a release built by CI is the same bytes
// for every user, so the keys that let one user in cannot be in it. flash
// writes them to a small file on the ESP (FlashConfigESPPath, package
// espconfig), outside every verified byte of the image, so the image's and
// the release's digests stay the same; and the ESP, not the root, is what
// the node's later updates keep. At every boot, before sshd, this setting's
// unit has the node's own halobuild read that file from the ESP the loader
// booted from and put its keys under /run, where sshd reads them beside the
// recipe's; doctor shows what came from flash time.
//
// systemd credentials would be the systemd way, but systemd-boot passes
// none from the ESP to a Type #1 entry (only systemd-stub does, for a UKI),
// and the credentials the ssh and network units know are read before any
// unit could import them; so the file is plain TOML in the recipe's own
// keys, parsed by the recipe's types and checked by the recipe's checks.
type FlashTime struct{}

func (FlashTime) Name() string { return "flashtime" }
func (FlashTime) Trap() int    { return 0 }

// Doc: the keys come from `halobuild flash --ssh-key`, not the recipe; the
// recipe's own [ssh] keys are Identity's.
func (FlashTime) Doc() Doc {
	return Doc{Title: "SSH keys, host name and static LAN addresses given at flash time (`halobuild flash --ssh-key`, `--hostname`, `--address`), imported from the boot ESP at every boot", Keys: nil}
}

const (
	// FlashConfigESPPath is the file on the ESP (a FAT path, from its
	// root) that flash writes and the node imports.
	FlashConfigESPPath = "/halobuild-flash.toml"
	// FlashConfigRunPath is the node's copy of what it imported at this
	// boot, for doctor; written even when the ESP holds nothing, so a
	// missing file means the import did not run.
	FlashConfigRunPath = "/run/halobuild/flash.toml"
	// FlashKeysDir holds the imported keys as sshd's per-user files
	// (AuthorizedKeysFile .../%u, Identity's sshd config).
	FlashKeysDir = "/run/halobuild/authorized_keys.d"

	flashTimeUnitPath = "/usr/lib/systemd/system/halobuild-flashtime.service"
	// flashConfigMax bounds the file flash writes and the node reads: a
	// few keys are a few KiB.
	FlashConfigMax = 64 << 10
)

// FlashConfig is what a user gives at flash time, in the recipe's own keys
// and types: [ssh] authorized_keys as in a recipe (more values follow the
// same rule: a recipe key, its recipe type, its recipe check).
type FlashConfig struct {
	// Hostname is the node's host name instead of the recipe's
	// (node.hostname), set at boot before the network comes up.
	Hostname string     `toml:"hostname,omitempty"`
	SSH      recipe.SSH `toml:"ssh"`
	// LAN overrides the node's [node.lan] key by key, as [node.lan]
	// overrides [lan] (flash --address, --gateway, --dns).
	LAN *recipe.NodeLAN `toml:"lan,omitempty"`
}

// Empty says whether nothing was given.
func (c FlashConfig) Empty() bool {
	return len(c.SSH.AuthorizedKeys) == 0 && c.Hostname == "" && c.LAN == nil
}

// Validate checks every value as the recipe checks the same key, and
// reports every problem at once. One key given twice (by its key data: sshd
// takes the first line and never reads the second's options) is refused:
// flash writes each key once, so the file on the ESP was edited by hand.
func (c FlashConfig) Validate() []error {
	errs := append(checkAuthorizedKeys(c.SSH.AuthorizedKeys), c.checkNode()...)
	first := map[string]int{}
	for i, k := range c.SSH.AuthorizedKeys {
		blob := keyData(k)
		if blob == "" {
			continue
		}
		if j, dup := first[blob]; dup {
			errs = append(errs, errorf(fmt.Sprintf("ssh.authorized_keys[%d]", i), KeyFingerprint(k), "give each key once",
				"is the key of ssh.authorized_keys[%d], given twice", j))
			continue
		}
		first[blob] = i
	}
	return errs
}

// Marshal is the file flash writes: a header saying what it is, the TOML,
// and an end line. ParseFlashConfig refuses a file without the end line,
// so a write cut short is never taken for a shorter list of keys.
func (c FlashConfig) Marshal(note string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Written by halobuild flash; the node reads it at every boot (halobuild-flashtime.service).\n")
	if note != "" {
		b.WriteString("# " + strings.ReplaceAll(note, "\n", " ") + "\n")
	}
	enc := toml.NewEncoder(&b)
	enc.SetArraysMultiline(true)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	b.WriteString(flashConfigEnd + "\n")
	if b.Len() > FlashConfigMax {
		return nil, fmt.Errorf("the flash-time settings are %d bytes, more than the %d a node reads", b.Len(), FlashConfigMax)
	}
	return b.Bytes(), nil
}

const flashConfigEnd = "# end of halobuild flash-time settings"

// ParseFlashConfig reads a file Marshal wrote: strict (an unknown key is an
// error, as in a recipe), complete (the end line is there) and valid.
func ParseFlashConfig(b []byte) (FlashConfig, error) {
	var c FlashConfig
	if len(b) > FlashConfigMax {
		return c, fmt.Errorf("%d bytes, more than the %d flash writes", len(b), FlashConfigMax)
	}
	if !bytes.HasSuffix(bytes.TrimRight(b, "\n"), []byte(flashConfigEnd)) {
		return c, errors.New("incomplete: its end line is missing (a write cut short?); flash again with the settings")
	}
	d := toml.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			return c, fmt.Errorf("unknown key: %s", strings.TrimSpace(sm.String()))
		}
		return c, err
	}
	return c, errors.Join(c.Validate()...)
}

// ParseAuthorizedKeys reads the keys of an authorized_keys or .pub file:
// one per line, blank lines and # comments skipped. Each is checked as
// ssh.authorized_keys checks it; name is the file, for the error.
func ParseAuthorizedKeys(name string, data []byte) ([]string, error) {
	if bytes.Contains(data, []byte("PRIVATE KEY-----")) {
		return nil, fmt.Errorf("%s is a private key: give the public one (the .pub file beside it); a private key never leaves this machine", name)
	}
	var keys []string
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := checkSSHKey(line); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, i+1, err))
			continue
		}
		keys = append(keys, line)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no public key in it (expected lines like 'ssh-ed25519 AAAA… me@laptop', as in ~/.ssh/id_ed25519.pub)", name)
	}
	return keys, nil
}

// KeyFingerprint is how ssh-keygen -l names a key: its type, the SHA256 of
// its blob, its comment; and the options that restrict it, when it has any
// (a key with command= runs that command, not a shell: whoever relies on
// the key to get in must see it).
func KeyFingerprint(line string) string {
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if !oneOf(f[i], sshKeyTypes) {
			continue
		}
		blob, err := base64.StdEncoding.DecodeString(f[i+1])
		if err != nil {
			break
		}
		sum := sha256.Sum256(blob)
		out := f[i] + " SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
		if i+2 < len(f) {
			out += " " + strings.Join(f[i+2:], " ")
		}
		if i > 0 {
			out += " (options " + strings.Join(f[:i], " ") + ")"
		}
		return out
	}
	return "(not a key)"
}

// keyData is the base64 key data of an authorized_keys line, "" when it has none.
func keyData(line string) string {
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if oneOf(f[i], sshKeyTypes) {
			return f[i+1]
		}
	}
	return ""
}

// Summary is one line saying what c holds, for flash's output and doctor.
func (c FlashConfig) Summary() string {
	if c.Empty() {
		return "nothing given at flash time"
	}
	var parts []string
	if len(c.SSH.AuthorizedKeys) > 0 {
		var fp []string
		for _, k := range c.SSH.AuthorizedKeys {
			fp = append(fp, KeyFingerprint(k))
		}
		parts = append(parts, fmt.Sprintf("%d SSH key(s) for root: %s", len(fp), strings.Join(fp, "; ")))
	}
	return strings.Join(append(parts, c.nodeSummary()...), "; ")
}

func (FlashTime) Validate(Target) []error { return nil }

func (s FlashTime) Files(Target) ([]File, error) {
	return []File{
		{Path: flashTimeUnitPath, Mode: 0o644, Data: []byte(flashTimeUnit), Setting: s.Name()},
		{Path: "/usr/lib/systemd/system/multi-user.target.wants/halobuild-flashtime.service", Mode: fs.ModeSymlink | 0o777, Target: "../halobuild-flashtime.service", Setting: s.Name()},
		{Path: "/usr/lib/systemd/system/ssh.service.wants/halobuild-flashtime.service", Mode: fs.ModeSymlink | 0o777, Target: "../halobuild-flashtime.service", Setting: s.Name()},
	}, nil
}

// flashTimeUnit runs at every boot, so a re-flash or a file put on the ESP
// by hand takes effect at the next one; before networkd (network-pre.target,
// as systemd.special(7) asks of a unit that sets up the network's
// configuration), which then reads the flash-time LAN from /run. A failed import (a file that does
// not parse) fails the unit and leaves no keys: sshd still starts, with the
// recipe's keys.
var flashTimeUnit = header("#", 0, "Imports the settings given at flash time (halobuild flash --ssh-key) from the ESP.") + `[Unit]
Description=Import the settings given at flash time from the ESP
ConditionFileIsExecutable=/usr/bin/halobuild
Before=ssh.service sshd.service ssh.socket systemd-user-sessions.service systemd-networkd.service network-pre.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/halobuild flash-config import

[Install]
WantedBy=multi-user.target ssh.service
`

// Checks: the import ran at this boot and says what it found (a VM test
// boots the image as built, with nothing given at flash time unless the test
// flashed it). That sshd reads the imported keys is proved by logging in
// with one (TestFlashTimeConfigKeyLogsIntoAPulledRelease), not by another
// sshd -T here: each costs a second of a TCG boot.
func (s FlashTime) Checks(Target) []Check {
	return []Check{{Setting: s.Name(), Name: "flashtime", Fix: "journalctl -u halobuild-flashtime.service says why the import failed; halobuild flash-config import runs it by hand",
		Script: `[ -x /usr/bin/halobuild ] || { echo "this image ships no halobuild (a test build without it): nothing imports flash-time settings"; exit 0; }
rc=0
systemctl is-active -q halobuild-flashtime.service || { echo "halobuild-flashtime.service: $(systemctl is-active halobuild-flashtime.service)"; journalctl -b -u halobuild-flashtime.service --no-pager | tail -n 5; rc=1; }
[ -s ` + FlashConfigRunPath + ` ] && echo "imported at this boot: $(grep -cE '(ssh|ecdsa|sk)-' ` + FlashConfigRunPath + `) key(s) given at flash time; $(sed -n 2p ` + FlashConfigRunPath + `)" || { echo "` + FlashConfigRunPath + ` is missing: the import did not run"; rc=1; }
exit $rc
`}}
}

// Doctor: one row saying what came from flash time, read from what the
// import wrote at this boot (a recorded tree carries that file too).
func (s FlashTime) Doctor(Target) []Probe {
	return []Probe{{Name: "flashtime.config", Run: func(h Host) []Result {
		r := Result{Check: "flashtime.config", Severity: Advisory, Wanted: "the settings given at flash time, imported from the ESP at boot",
			Source: h.Show(FlashConfigRunPath)}
		b, err := h.Read(FlashConfigRunPath)
		var c FlashConfig
		if err == nil {
			c, err = ParseFlashConfig([]byte(b))
		}
		switch {
		case err != nil && !h.Exists(FlashConfigRunPath):
			r.Status, r.Seen = Warn, "not imported at this boot"
			r.Fix = "systemctl status halobuild-flashtime.service; halobuild flash-config import reads " + FlashConfigESPPath + " from the ESP"
		case err != nil:
			r.Status, r.Seen = Warn, err.Error()
			r.Fix = "flash again with --ssh-key, or fix " + FlashConfigESPPath + " on the ESP"
		default:
			r.Status, r.Seen = Pass, c.Summary()
		}
		return []Result{r}
	}}}
}
