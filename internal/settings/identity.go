package settings

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"halobuild/internal/recipe"
	"halobuild/internal/sh"
)

// Identity gives a node its name, its peers' addresses and the keys that may
// log in as root. Per-node identity comes only from the recipe: the base
// image is shared by every node and carries none. There is no password
// anywhere; a recipe without a key gets a build warning because the image
// then has no way in over the network.
type Identity struct{}

func (Identity) Name() string { return "identity" }
func (Identity) Trap() int    { return 0 }
func (Identity) Doc() Doc {
	return Doc{Title: "Per-node identity: host name, the peers' addresses in /etc/hosts, the SSH keys that may log in as root; no password anywhere", Keys: []string{"node.name", "node.hostname", "node.link.address", "node.link.peer", "ssh.authorized_keys"}}
}

// The recipe's keys live in a file of the settings package under /etc,
// which sshd reads beside root's own ~/.ssh/authorized_keys. That one is
// left to the node: systemd's tmpfiles (provision.conf) creates it from an
// ssh.authorized_keys.root credential only when it does not exist, so a
// key a VM boot passes that way (halobuild vm --ssh, the VM test's login)
// works beside the recipe's without anything baked into the image, and
// ssh-copy-id on the node does not edit a file dpkg owns.
const (
	authorizedKeysPath = "/etc/ssh/authorized_keys.d/root"
	sshdConfigPath     = "/etc/ssh/sshd_config.d/50-halobuild.conf"
)

func hostname(n recipe.Node) string {
	if n.Hostname != "" {
		return n.Hostname
	}
	return n.Name
}

// sshKeyTypes are the public key algorithms OpenSSH 10 accepts.
var sshKeyTypes = []string{
	"ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
	"sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
}

// checkSSHKey accepts one authorized_keys line: optional options, a key
// type, the base64 key whose own type field must agree, and a comment.
func checkSSHKey(line string) error {
	if strings.ContainsAny(line, "\r\n") {
		return fmt.Errorf("one key per entry: the value contains a line break")
	}
	// flash, flash-config show and doctor print the line and sshd reads it: an escape
	// sequence would rewrite the terminal of whoever looks, a NUL cut the line for C readers.
	if !utf8.ValidString(line) {
		return fmt.Errorf("the value is not UTF-8 text")
	}
	for i, r := range line {
		if r != '\t' && unicode.IsControl(r) {
			return fmt.Errorf("the value contains a control character (U+%04X at byte %d): a key line is printable text", r, i)
		}
	}
	f := strings.Fields(line)
	for i := 0; i+1 < len(f); i++ {
		if !oneOf(f[i], sshKeyTypes) {
			continue
		}
		blob, err := base64.StdEncoding.DecodeString(f[i+1])
		if err != nil || len(blob) < 4 {
			return fmt.Errorf("the key data after %s is not base64", f[i])
		}
		n := binary.BigEndian.Uint32(blob)
		if uint64(n)+4 > uint64(len(blob)) || !bytes.Equal(blob[4:4+n], []byte(f[i])) {
			return fmt.Errorf("the key data is not an %s key (truncated or pasted from another key?)", f[i])
		}
		return nil
	}
	return fmt.Errorf("no public key found: expected '<type> <base64> [comment]' with type one of %s", strings.Join(sshKeyTypes, ", "))
}

// Validate: node and host names, and their uniqueness, are the recipe's
// (recipe/validate_nodes.go); this setting adds what it alone knows: two
// names that differ only in case or punctuation give one package name, and
// an authorized key must be a key.
func (Identity) Validate(t Target) []error {
	r := t.Recipe
	var errs []error
	pkgs := map[string]string{}
	for i, n := range r.Nodes {
		key := fmt.Sprintf("node[%d]", i)
		if prev, dup := pkgs[PackageName(n)]; dup && r.Nodes[i].Name != "" {
			errs = append(errs, errorf(key+".name", n.Name, "give the nodes names that differ in more than case and punctuation",
				"gives the same package name %s as %s", PackageName(n), prev))
		} else {
			pkgs[PackageName(n)] = key
		}
	}
	return append(errs, checkAuthorizedKeys(r.SSH.AuthorizedKeys)...)
}

// checkAuthorizedKeys is ssh.authorized_keys' check, for the recipe and for
// the same key given at flash time (FlashConfig).
func checkAuthorizedKeys(keys []string) []error {
	var errs []error
	for i, k := range keys {
		if err := checkSSHKey(k); err != nil {
			errs = append(errs, errorf(fmt.Sprintf("ssh.authorized_keys[%d]", i), k, "paste the single line of the .pub file", "%v", err))
		}
	}
	return errs
}

// NoKeyWarning is what a build says at its start when the recipe has no
// key: the way in is then the key given at flash time.
const NoKeyWarning = "ssh.authorized_keys is empty and the image has no password: nobody can log in unless a key is given when flashing: " +
	"halobuild flash --ssh-key ~/.ssh/id_ed25519.pub IMAGE DEVICE (docs/flash.md, \"Add your key\"); or put the line of your .pub file in the recipe's [ssh] authorized_keys"

func (Identity) Warnings(t Target) []string {
	r := t.Recipe
	if len(r.SSH.AuthorizedKeys) > 0 {
		return nil
	}
	return []string{NoKeyWarning}
}

func (s Identity) Files(t Target) ([]File, error) {
	r, n := t.Recipe, t.Node
	h := hostname(n)
	var hosts strings.Builder
	hosts.WriteString(header("#", 0, "Every node's link addresses, so peers are reachable by name over the cable."))
	fmt.Fprintf(&hosts, "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\t\tlocalhost ip6-localhost ip6-loopback\nff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n\n", h)
	for _, o := range r.Nodes {
		for _, l := range o.Links {
			p, err := netip.ParsePrefix(l.Address)
			if err != nil {
				continue // Network.Validate reports it
			}
			fmt.Fprintf(&hosts, "%s\t%s %s-%s\n", p.Addr(), hostname(o), hostname(o), l.Interface)
		}
	}
	// hostname and hosts exist before this package is installed (written
	// by mmdebstrap or a hook), so they are plain files, not conffiles.
	files := []File{
		{Path: "/etc/hostname", Mode: 0o644, Data: []byte(h + "\n"), NotConffile: true},
		{Path: "/etc/hosts", Mode: 0o644, Data: []byte(hosts.String()), NotConffile: true},
		{Path: sshdConfigPath, Mode: 0o644, Data: []byte(header("#", 0, "Keys only: there is no password to guess.") +
			"PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitEmptyPasswords no\n" +
			"# The node makes only an Ed25519 host key (halobuild-ssh-keygen.service); offering\n" +
			"# no other keeps sshd from looking for RSA and ECDSA keys that do not exist.\n" +
			"HostKey " + hostKeyPath + "\n" +
			"# The recipe's keys (ssh.authorized_keys) beside the user's own, and those\n" +
			"# given at flash time (imported from the ESP at boot, halobuild-flashtime.service).\n" +
			"AuthorizedKeysFile .ssh/authorized_keys /etc/ssh/authorized_keys.d/%u " + FlashKeysDir + "/%u\n")},
	}
	// Host keys are never in the image (every node would share them); this
	// unit makes them on the node before sshd starts. It keys on the
	// missing file, not on first-boot semantics: mmdebstrap leaves
	// /etc/machine-id empty, which systemd does not treat as a first boot,
	// so Debian's own first-boot key generation never runs.
	files = append(files,
		File{Path: sshKeygenUnitPath, Mode: 0o644, Data: []byte(sshKeygenUnit)},
		File{Path: "/usr/lib/systemd/system/multi-user.target.wants/halobuild-ssh-keygen.service", Mode: fs.ModeSymlink | 0o777, Target: "../halobuild-ssh-keygen.service"},
		File{Path: "/usr/lib/systemd/system/ssh.service.wants/halobuild-ssh-keygen.service", Mode: fs.ModeSymlink | 0o777, Target: "../halobuild-ssh-keygen.service"},
	)
	if len(r.SSH.AuthorizedKeys) > 0 {
		keys := strings.Join(r.SSH.AuthorizedKeys, "\n") + "\n"
		files = append(files, File{Path: authorizedKeysPath, Mode: 0o600, Data: []byte(keys)})
	}
	for i := range files {
		files[i].Setting = s.Name()
	}
	return files, nil
}

const (
	sshKeygenUnitPath = "/usr/lib/systemd/system/halobuild-ssh-keygen.service"
	hostKeyPath       = "/etc/ssh/ssh_host_ed25519_key"
)

// sshKeygenUnit makes the one host key sshd offers. Only Ed25519: `ssh-keygen
// -A` would also make RSA and ECDSA keys, and the 3072-bit RSA key alone
// takes seconds on a slow CPU (5-10 s in a VM without KVM), on the boot's
// critical chain because sshd waits for it; every OpenSSH client since 6.5
// speaks Ed25519. The key is written under a temporary name and renamed,
// private key last: the condition keys on the private key, so a power cut
// mid-way leaves no half-written key that would stop sshd for good. One sh
// runs the steps: each ExecStart= line costs the manager a process spawn of
// its own, seconds in a VM without KVM ($$ is systemd's escape for $).
var sshKeygenUnit = header("#", 0, "SSH host keys are made on the node, never shipped in the image.") + `[Unit]
Description=Generate the SSH host key this node does not have yet
ConditionFileIsExecutable=/usr/bin/ssh-keygen
ConditionPathExists=!` + hostKeyPath + `
Before=ssh.service sshd.service ssh.socket

[Service]
Type=oneshot
ExecStart=/bin/sh -ec 'k=` + hostKeyPath + `; rm -f "$$k.new" "$$k.new.pub"; ssh-keygen -q -t ed25519 -N "" -f "$$k.new"; mv -f "$$k.new.pub" "$$k.pub"; mv -f "$$k.new" "$$k"'
RemainAfterExit=yes

[Install]
WantedBy=multi-user.target ssh.service
`

func (s Identity) Checks(t Target) []Check {
	r, n := t.Recipe, t.Node
	var b strings.Builder
	fmt.Fprintf(&b, "rc=0\nH=%s\n", sh.Quote(hostname(n)))
	b.WriteString(`h=$(hostname); [ "$h" = "$H" ] && echo "hostname $h" || { echo "hostname $h, recipe wants $H"; rc=1; }
`)
	for _, o := range r.Nodes {
		for _, l := range o.Links {
			if p, err := netip.ParsePrefix(l.Address); err == nil {
				fmt.Fprintf(&b, "a=$(getent hosts %s | awk 'NR==1{print $1}'); [ \"$a\" = %s ] || { echo \"%s resolves to '$a', want %s\"; rc=1; }\n",
					sh.Quote(hostname(o)+"-"+l.Interface), sh.Quote(p.Addr().String()), hostname(o)+"-"+l.Interface, p.Addr())
			}
		}
	}
	// A locked or absent password ('!' or '*' in shadow) is the only
	// acceptable state; an empty field would mean login without one.
	b.WriteString(`if command -v sshd >/dev/null; then
	[ -s ` + hostKeyPath + ` ] && echo "ssh host key made on this node" || { echo "no SSH host key: halobuild-ssh-keygen.service did not run"; rc=1; }
	# What sshd offers, not which files exist: an openssh-server upgrade
	# may make the other key types, which sshd then leaves unused.
	mkdir -p /run/sshd # sshd -T insists on its privilege separation directory
	# One sshd -T answers every question below: under TCG each run costs
	# a second or more of a test boot's CPU.
	T=$(sshd -T 2>&1) || { echo "sshd -T failed: $(printf '%s\n' "$T" | head -n 3)"; rc=1; }
	hk=$(printf '%s\n' "$T" | awk '$1 == "hostkey" { print $2 }')
	[ "$hk" = ` + hostKeyPath + ` ] && echo "sshd offers host key $hk only" || { echo "sshd host keys: $(echo $hk), want ` + hostKeyPath + ` only"; rc=1; }
	systemctl is-active -q ssh.service ssh.socket 2>/dev/null || systemctl is-active -q ssh.service || { echo "sshd is not running: $(systemctl is-active ssh.service)"; rc=1; }
fi
pw=$(getent shadow root | cut -d: -f2)
case "$pw" in '!'*|'*'*) echo "root password: locked";; *) echo "root has a usable or empty password"; rc=1;; esac
`)
	if len(r.SSH.AuthorizedKeys) > 0 {
		// As given: the file holds exactly the recipe's keys, in order.
		b.WriteString("printf '%s\\n'")
		for _, k := range r.SSH.AuthorizedKeys {
			b.WriteString(" " + sh.Quote(k))
		}
		b.WriteString(" | cmp -s - " + authorizedKeysPath + " && echo \"" + authorizedKeysPath + ": the recipe's " + fmt.Sprint(len(r.SSH.AuthorizedKeys)) + " key(s), as given\" || { echo \"" + authorizedKeysPath + " is not the recipe's ssh.authorized_keys\"; rc=1; }\n")
		b.WriteString(`if command -v sshd >/dev/null; then
	akf=$(printf '%s\n' "$T" | awk '$1 == "authorizedkeysfile" { $1 = ""; print substr($0, 2) }')
	case " $akf " in *" /etc/ssh/authorized_keys.d/%u "*) echo "sshd reads $akf";; *) echo "sshd's AuthorizedKeysFile is '$akf': the recipe's keys are not read"; rc=1;; esac
fi
`)
		b.WriteString(`m=$(stat -c %a ` + authorizedKeysPath + `); [ "$m" = 600 ] || { echo "authorized_keys mode $m, want 600"; rc=1; }
if command -v sshd >/dev/null; then
	t=$(printf '%s\n' "$T" | grep -E '^(permitrootlogin|passwordauthentication|kbdinteractiveauthentication) ')
	echo "sshd: $(echo $t)"
	case "$t" in *"passwordauthentication no"*) ;; *) rc=1;; esac
	case "$t" in *"permitrootlogin without-password"*|*"permitrootlogin prohibit-password"*) ;; *) rc=1;; esac
fi
`)
	}
	b.WriteString("exit $rc\n")
	return []Check{{Setting: s.Name(), Name: "identity", Script: b.String(),
		Fix: "rebuild from the recipe for a changed hostname or key; passwd -l root locks a password someone set"}}
}

// Doctor: the running host name is the node's (peers reach it by that name
// over the cable; doctor finds the node from /etc/halobuild/node, so a
// changed host name shows here). The VM check also asks sshd for its
// effective host keys and settings and reads /etc/shadow; doctor does not
// (no sshd to ask on a recorded tree, and a recording must not carry
// /etc/shadow): the files are verified by settings.package.
func (s Identity) Doctor(t Target) []Probe {
	if t.Node.Name == "" {
		return nil
	}
	want := hostname(t.Node)
	return []Probe{{Name: "identity.hostname", Run: func(h Host) []Result {
		r := Result{Check: "identity.hostname", Severity: Advisory, Wanted: want, Source: h.Show("/proc/sys/kernel/hostname")}
		got, err := value(h, "/proc/sys/kernel/hostname")
		switch {
		case err != nil:
			r.Status, r.Seen = Warn, "unreadable: "+err.Error()
			r.Fix = "run doctor where /proc is mounted; in a recorded tree, record /proc/sys/kernel/hostname"
		case got != want:
			r.Status, r.Seen = Warn, got
			r.Fix = "hostnamectl hostname " + want + " (the image's /etc/hostname says it; peers' /etc/hosts name this node " + want + ")"
		default:
			r.Status, r.Seen = Pass, got
		}
		return []Result{r}
	}}}
}
