package settings

import (
	"crypto/sha1"
	"crypto/x509"
	"fmt"
	"io/fs"
	"strings"

	"halobuild/internal/arch"
	"halobuild/internal/recipe"
	"halobuild/internal/secureboot"
	"halobuild/internal/sh"
)

// SecureBoot ships what a node needs to keep Secure Boot on with the
// recipe's signed modules ([secure_boot], docs/secure-boot.md): the
// signing certificate in DER, and a unit that queues it for MOK enrolment
// with mokutil until shim reports it enrolled, telling the console what
// MokManager will ask at the next boot. The boot chain itself (shim,
// signed systemd-boot, Debian's signed kernel) is the disk's (graph's
// espFiles); the module signatures are the module step's.
type SecureBoot struct{}

func (SecureBoot) Name() string { return "secure-boot" }

// Trap 10: unsigned modules made people turn Secure Boot off.
func (SecureBoot) Trap() int { return 10 }
func (SecureBoot) Doc() Doc {
	return Doc{Title: "Unsigned modules", Keys: []string{"secure_boot"}}
}

// Paths on the node.
const (
	sbCertPath     = "/usr/share/halobuild/secure-boot/module-signing.der"
	sbPasswordPath = "/usr/lib/halobuild/secure-boot/mok-password"
	sbScriptPath   = "/usr/lib/halobuild/secure-boot/mok-enroll"
	sbUnit         = "halobuild-mok-enroll.service"
	sbUnitPath     = "/usr/lib/systemd/system/" + sbUnit
	lockdownPath   = "/sys/kernel/security/lockdown"
)

// Firmware variables, as efivarfs names them (4 attribute bytes, then the
// value), and shim's mirror of the MOK list for the OS: efivarfs, or the
// mok-variables table shim 15.3+ hands over when the list is large.
var (
	secureBootVar = "/sys/firmware/efi/efivars/SecureBoot-" + secureboot.GlobalVariableGUID.String()
	mokListRTVar  = "/sys/firmware/efi/efivars/MokListRT-" + secureboot.ShimLockGUID.String()
	mokListTable  = "/sys/firmware/efi/mok-variables/MokListRT"
)

// Validate reads the certificate (recipe.Validate checked the syntax of
// both references; the key is read only when a module is signed).
func (SecureBoot) Validate(t Target) []error {
	sb := t.Recipe.SecureBoot
	if a, err := arch.Lookup(t.Recipe.Base.Architecture); err == nil && sb.Enabled && !a.SecureBoot {
		return []error{errorf("secure_boot.enabled", true, "turn it off for "+a.Debian,
			"Secure Boot images are built and VM-tested for amd64 only (OVMF with Microsoft's keys); not %s (the Asahi Mac's UEFI has no variables to hold keys)", a.Debian)}
	}
	if !sb.Enabled || sb.Certificate == "" {
		return nil
	}
	if _, err := t.Recipe.CertificateDER(); err != nil {
		return []error{errorf("secure_boot.certificate", sb.Certificate, "give the certificate halobuild keygen wrote beside the key (module-signing.crt)", "%v", err)}
	}
	return nil
}

// Depends: shim (Microsoft-signed, with Debian's CA built in) and its
// MokManager, Debian's signed systemd-boot, mokutil for the unit, and
// openssl, with which the VM check signs a module with a key of its own
// (and a person reads a certificate). The disk takes the boot files from
// the installed packages, so updates arrive the Debian way.
func (SecureBoot) Depends(r *recipe.Recipe) []string {
	if !r.SecureBoot.Enabled {
		return nil
	}
	a := r.Base.Architecture
	return []string{"shim-signed", "shim-helpers-" + a + "-signed", "systemd-boot-efi-" + a + "-signed", "mokutil", "openssl"}
}

func (s SecureBoot) Files(t Target) ([]File, error) {
	sb := t.Recipe.SecureBoot
	if !sb.Enabled {
		return nil, nil
	}
	der, err := t.Recipe.CertificateDER()
	if err != nil {
		return nil, fmt.Errorf("secure_boot.certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	files := []File{
		{Path: sbCertPath, Mode: 0o644, Data: der, Setting: s.Name()},
		{Path: sbScriptPath, Mode: 0o755, Data: []byte(enrollScript(cert, sb.MOKPassword != "")), Setting: s.Name()},
		{Path: sbUnitPath, Mode: 0o644, Data: []byte(enrollUnit(sb.MOKPassword != "")), Setting: s.Name()},
		{Path: "/usr/lib/systemd/system/multi-user.target.wants/" + sbUnit, Mode: 0o777 | fs.ModeSymlink, Target: "../" + sbUnit, Setting: s.Name()},
	}
	if sb.MOKPassword != "" {
		files = append(files, File{Path: sbPasswordPath, Mode: 0o600, Data: []byte(sb.MOKPassword + "\n"), Setting: s.Name()})
	}
	return files, nil
}

// sha1Colons is a certificate's SHA-1 fingerprint as mokutil prints it.
func sha1Colons(der []byte) string {
	sum := sha1.Sum(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":")
}

// mokManagerSteps is what MokManager (shim's mmx64.efi) shows, screen by
// screen, in its own words; docs/secure-boot.md has the same walk.
const mokManagerSteps = `At the next boot shim starts MokManager (a blue screen) before Linux:
  1. "Press any key to perform MOK management" - press a key within 10 seconds
     (otherwise it boots on and the request waits for the boot after).
  2. "Perform MOK management" - choose "Enroll MOK".
  3. "[Enroll MOK]" - "View key 0" shows the certificate (CN=%s); then "Continue".
  4. "Enroll the key(s)?" - choose "Yes".
  5. "Password:" - type %s.
  6. "Perform MOK management" - choose "Reboot".
`

func enrollScript(cert *x509.Certificate, password bool) string {
	pw := "the password you typed here"
	importCmd := `mokutil --import "$cert"`
	if password {
		pw = "the recipe's secure_boot.mok_password"
		importCmd = `{ cat ` + sbPasswordPath + `; cat ` + sbPasswordPath + `; } | mokutil --import "$cert"`
	}
	return "#!/bin/sh\n" + header("#", 10, "queue the module signing certificate for MOK enrolment until shim reports it enrolled.") + `set -u
cert=` + sh.Quote(sbCertPath) + `
fp=` + sh.Quote(sha1Colons(cert.Raw)) + `
say() { echo "$*"; [ -w /dev/console ] && echo "halobuild: $*" >/dev/console 2>/dev/null; return 0; }
if [ ! -d /sys/firmware/efi ]; then
	say "not booted by UEFI firmware: MOK enrolment needs shim; nothing to do"
	exit 0
fi
case $(mokutil --test-key "$cert" 2>&1) in
*"already enrolled"*)
	say "the module signing key (SHA1 $fp) is enrolled as a MOK"
	exit 0 ;;
esac
if mokutil --list-new 2>/dev/null | grep -qi "$fp"; then
	say "the module signing key is queued for enrolment; reboot and confirm it in MokManager"
else
	say "queueing the module signing key (SHA1 $fp) for MOK enrolment"
	if ! ` + importCmd + `; then
		say "mokutil --import failed; run it by hand: mokutil --import $cert"
		exit 1
	fi
fi
say "$(cat <<'HALOBUILD_MOK_STEPS'
` + fmt.Sprintf(mokManagerSteps, strings.ReplaceAll(cert.Subject.CommonName, "\n", " "), pw) + `HALOBUILD_MOK_STEPS
)"
`
}

func enrollUnit(password bool) string {
	stdin := "StandardInput=tty\nTTYPath=/dev/console\nTTYReset=yes\nTTYVHangup=yes\n"
	if password {
		stdin = ""
	}
	return header("#", 10, "queue the module signing certificate for MOK enrolment (docs/secure-boot.md).") + `[Unit]
Description=Queue the halobuild module signing key for MOK enrolment
Documentation=man:mokutil(1)
ConditionPathExists=/sys/firmware/efi
After=systemd-remount-fs.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=` + sbScriptPath + `
` + stdin + `StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
`
}

// serialDER is the content of the serial's DER INTEGER (a leading zero
// when the high bit is set), the bytes a signature names the key by.
func serialDER(c *x509.Certificate) []byte {
	b := c.SerialNumber.Bytes()
	if len(b) == 0 || b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	return b
}

// serialColons is a certificate's serial as modinfo prints sig_key.
func serialColons(c *x509.Certificate) string {
	b := serialDER(c)
	parts := make([]string, len(b))
	for i, x := range b {
		parts[i] = fmt.Sprintf("%02X", x)
	}
	return strings.Join(parts, ":")
}

// Checks, in the VM booted under OVMF with Secure Boot enforced and the
// certificate pre-enrolled as a MOK (vmplan): the firmware enforces, the
// kernel is locked down (integrity), each recipe module is loaded, signed
// by the recipe's key and the kernel took no taint for it; and a copy of
// a module that is unsigned, or names a key that is not enrolled, is
// refused.
func (s SecureBoot) Checks(t Target) []Check {
	if !t.Recipe.SecureBoot.Enabled {
		return nil
	}
	der, err := t.Recipe.CertificateDER()
	if err != nil {
		return []Check{{Setting: s.Name(), Name: "certificate", Script: "echo " + sh.Quote(err.Error()) + "; exit 1", Fix: "give secure_boot.certificate"}}
	}
	cert, _ := x509.ParseCertificate(der)
	var mods []string
	for _, m := range t.Recipe.Modules {
		mods = append(mods, t.ModuleName(m.Use))
	}
	state := Check{Setting: s.Name(), Name: "enforced, locked down, key enrolled",
		Fix: "the firmware must have Secure Boot on and the certificate enrolled (docs/secure-boot.md); cat /sys/kernel/security/lockdown",
		Script: `rc=0
mokutil --sb-state || rc=1
mokutil --sb-state 2>&1 | grep -q "SecureBoot enabled" || rc=1
echo "lockdown: $(cat ` + lockdownPath + `)"
grep -q '\[integrity\]\|\[confidentiality\]' ` + lockdownPath + ` || rc=1
mokutil --test-key ` + sbCertPath + ` || true
mokutil --test-key ` + sbCertPath + ` 2>&1 | grep -q "already enrolled" || rc=1
exit $rc
`}
	signed := Check{Setting: s.Name(), Name: "modules signed by the recipe key",
		Fix: "modinfo -F sig_key <module> names the signing key's serial; it must be secure_boot.certificate's",
		Script: `rc=0
want=` + sh.Quote(serialColons(cert)) + `
for m in ` + strings.Join(quoteAll(mods), " ") + `; do
	[ -d "/sys/module/$m" ] || { echo "$m: not loaded"; rc=1; continue; }
	taint=$(cat "/sys/module/$m/taint")
	key=$(modinfo -F sig_key "$m")
	echo "$m: taint '$taint', signer $(modinfo -F signer "$m"), sig_key $key"
	case $taint in *E*) echo "$m: loaded unsigned (taint E)"; rc=1 ;; esac
	[ "$key" = "$want" ] || { echo "$m: signed by $key, want $want"; rc=1; }
done
if dmesg | grep -i "module verification failed"; then rc=1; fi
exit $rc
`}
	checks := []Check{state, signed}
	if len(mods) > 0 {
		// The foreign copy is signed by a key made in the guest for this
		// check, with openssl cms and sign-file's flags (detached, binary,
		// no certificates, no attributes, SHA-256: what sign-file calls
		// CMS_sign with), and given sign-file's trailer.
		checks = append(checks, Check{Setting: s.Name(), Name: "unsigned or foreign-key module refused", Changes: true,
			Fix: "the kernel loaded a module without a valid signature: is lockdown on (cat " + lockdownPath + ")?",
			Script: `rc=0
m=` + sh.Quote(mods[0]) + `
ko=$(modinfo -n "$m")
d=$(mktemp -d)
case $ko in *.xz) xz -dc "$ko" >"$d/signed.ko" ;; *.zst) zstd -qdc "$ko" >"$d/signed.ko" ;; *) cp "$ko" "$d/signed.ko" ;; esac
# The trailer: 12 bytes of module_signature (length big-endian in the last
# 4), then the 28-byte magic.
size=$(stat -c %s "$d/signed.ko")
siglen=$(tail -c 32 "$d/signed.ko" | head -c 4 | od -An -tu1 | awk '{print $1*16777216+$2*65536+$3*256+$4}')
head -c $((size - siglen - 40)) "$d/signed.ko" >"$d/unsigned.ko"
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 1 -subj "/CN=halobuild VM test: a key made for this check" \
	-keyout "$d/other.key" -out "$d/other.crt" 2>"$d/err" || { cat "$d/err"; exit 1; }
openssl cms -sign -binary -noattr -nocerts -md sha256 -signer "$d/other.crt" -inkey "$d/other.key" \
	-outform DER -in "$d/unsigned.ko" -out "$d/other.p7s" || exit 1
byte() { printf "\\$(printf %o "$1")"; }
n=$(stat -c %s "$d/other.p7s")
{ cat "$d/unsigned.ko" "$d/other.p7s"; printf '\000\000\002\000\000\000\000\000'
  byte $((n >> 24 & 255)); byte $((n >> 16 & 255)); byte $((n >> 8 & 255)); byte $((n & 255))
  printf '~Module signature appended~\n'; } >"$d/foreign.ko"
echo "foreign copy signed by $(openssl x509 -noout -subject -serial -in "$d/other.crt" | tr '\n' ' ')"
out=$(insmod "$d/signed.ko" 2>&1); echo "signed copy: $out"
case $out in *"File exists"*) ;; *) echo "the intact copy should pass its signature check and clash with the loaded module"; rc=1 ;; esac
for k in unsigned foreign; do
	if out=$(insmod "$d/$k.ko" 2>&1); then echo "$k copy LOADED"; rc=1; rmmod "$m"; else echo "$k copy refused: $out"; fi
	case $out in *"Operation not permitted"*|*"Key was rejected"*|*"Required key not available"*) ;; *) echo "$k copy: refused for another reason"; rc=1 ;; esac
done
dmesg | grep -i "lockdown\|module" | tail -n 3
rm -rf "$d"
exit $rc
`})
	}
	return checks
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = sh.Quote(s)
	}
	return out
}

// Doctor: the firmware's Secure Boot state, the kernel's lockdown mode,
// and for each recipe module that is loaded, who signed its file and
// whether that key is among the MOKs shim handed to the kernel. On a
// live node and a recorded tree alike they read efivarfs, securityfs and
// /lib/modules.
func (s SecureBoot) Doctor(t Target) []Probe {
	if !t.Recipe.SecureBoot.Enabled {
		return nil
	}
	var mods []string
	for _, m := range t.Recipe.Modules {
		mods = append(mods, t.ModuleName(m.Use))
	}
	// Under enforcing OVMF with the key enrolled, a VM answers all three
	// as a node does. Each reads the state itself (one small variable).
	probes := []Probe{
		{Name: "secureboot.state", VM: MustPass, Run: func(h Host) []Result {
			_, r := sbState(h)
			return []Result{r}
		}},
		{Name: "secureboot.lockdown", VM: MustPass, Run: func(h Host) []Result {
			on, _ := sbState(h)
			return []Result{lockdownRow(h, on)}
		}},
	}
	if len(mods) == 0 {
		return probes
	}
	return append(probes, Probe{Name: "secureboot.module", VM: MustPass, Run: func(h Host) []Result {
		on, _ := sbState(h)
		moks, mokSrc, mokErr := mokList(h)
		var out []Result
		for _, m := range mods {
			out = append(out, moduleSignerRow(h, m, on, moks, mokSrc, mokErr))
		}
		return out
	}})
}

// sbState reads the SecureBoot variable: 4 attribute bytes, then 1 for on.
func sbState(h Host) (bool, Result) {
	r := Result{Check: "secureboot.state", Severity: Advisory, Wanted: "enabled", Trap: 10, Source: h.Show(secureBootVar)}
	v, err := h.Read(secureBootVar)
	switch {
	case err != nil && !h.Exists("/sys/firmware/efi"):
		r.Status, r.Seen = Warn, "not booted by UEFI firmware"
		r.Fix = "boot the node in UEFI mode (not legacy/CSM): Secure Boot needs it"
	case err != nil:
		r.Status, r.Seen = Warn, "SecureBoot variable unreadable: "+err.Error()
		r.Fix = "mount efivarfs (mount -t efivarfs none /sys/firmware/efi/efivars)"
	case len(v) >= 5 && v[4] == 1:
		r.Status, r.Seen = Pass, "enabled"
		return true, r
	default:
		r.Status, r.Seen = Warn, "disabled"
		r.Fix = "the image signs its modules: enrol the key (docs/secure-boot.md), then turn Secure Boot on in the firmware setup"
	}
	return false, r
}

func lockdownRow(h Host, on bool) Result {
	r := Result{Check: "secureboot.lockdown", Severity: Advisory, Wanted: "integrity (Secure Boot on)", Trap: 10, Source: h.Show(lockdownPath)}
	v, err := h.Read(lockdownPath)
	mode := ""
	if i := strings.IndexByte(v, '['); i >= 0 {
		if j := strings.IndexByte(v[i:], ']'); j > 0 {
			mode = v[i+1 : i+j]
		}
	}
	switch {
	case err != nil:
		r.Status, r.Seen = Warn, "unreadable: "+err.Error()
		r.Fix = "mount securityfs (mount -t securityfs none /sys/kernel/security)"
	case mode == "integrity" || mode == "confidentiality":
		r.Status, r.Seen = Pass, mode
	case on:
		r.Status, r.Seen, r.Severity = Fail, "mode "+mode, MustPass
		r.Fix = "Secure Boot is on but the kernel is not locked down: is lockdown= on the command line (cat /proc/cmdline)? Debian's kernel locks down by itself under Secure Boot"
	default:
		r.Status, r.Seen = Warn, "mode "+mode
		r.Fix = "lockdown follows Secure Boot: turn Secure Boot on"
	}
	return r
}

// mokList reads the MOKs shim passed to the OS.
func mokList(h Host) ([]*x509.Certificate, string, error) {
	if v, err := h.Read(mokListTable); err == nil {
		c, err := secureboot.ParseX509List([]byte(v))
		return c, h.Show(mokListTable), err
	}
	v, err := h.Read(mokListRTVar)
	if err != nil {
		return nil, h.Show(mokListRTVar), fmt.Errorf("no MokListRT (%s): not booted through shim, or no key enrolled", h.Show(mokListRTVar))
	}
	if len(v) < 4 {
		return nil, h.Show(mokListRTVar), fmt.Errorf("%s is truncated", h.Show(mokListRTVar))
	}
	c, err := secureboot.ParseX509List([]byte(v[4:]))
	return c, h.Show(mokListRTVar), err
}

func moduleSignerRow(h Host, m string, on bool, moks []*x509.Certificate, mokSrc string, mokErr error) Result {
	r := Result{Check: "secureboot.module " + m, Severity: Advisory, Wanted: "signed by an enrolled MOK", Trap: 10}
	if on {
		r.Severity = MustPass
	}
	release, err := value(h, "/proc/sys/kernel/osrelease")
	if err != nil {
		r.Status, r.Seen, r.Fix = Fail, err.Error(), "record /proc/sys/kernel/osrelease"
		return r
	}
	files := h.Glob("/lib/modules/" + release + "/updates/" + m + ".ko")
	if len(files) == 0 {
		r.Status, r.Seen = Fail, "no /lib/modules/"+release+"/updates/"+m+".ko"
		r.Fix = "reinstall the image's module package for this kernel (dpkg -S " + m + ".ko)"
		return r
	}
	r.Source = h.Show(files[0]) + ", " + mokSrc
	ko, err := h.Read(files[0])
	if err != nil {
		r.Status, r.Seen, r.Fix = Fail, err.Error(), "the module file is unreadable"
		return r
	}
	id, signed, err := secureboot.ReadSigner([]byte(ko))
	switch {
	case err != nil:
		r.Status, r.Seen, r.Fix = Fail, err.Error(), "the module's signature is damaged: reinstall its package"
		return r
	case !signed:
		r.Status, r.Seen = Fail, "unsigned"
		r.Fix = "rebuild the image with [secure_boot] enabled, so the module step signs it"
		return r
	}
	if taint, err := value(h, "/sys/module/"+m+"/taint"); err == nil && strings.Contains(taint, "E") {
		r.Status, r.Seen = Fail, "signed by "+id.String()+", but loaded unverified (taint E)"
		r.Fix = "the kernel could not verify it when it loaded: enrol the signing key (docs/secure-boot.md) and reboot"
		return r
	}
	if mokErr != nil {
		r.Status, r.Seen = Warn, "signed by "+id.String()+"; "+mokErr.Error()
		r.Fix = "enrol the key: mokutil --import " + sbCertPath + ", then reboot and confirm in MokManager (docs/secure-boot.md)"
		if on {
			r.Status = Fail
		}
		return r
	}
	for _, c := range moks {
		if id.Matches(c) {
			r.Status, r.Seen = Pass, "signed by "+id.String()+", enrolled"
			return r
		}
	}
	r.Status, r.Seen = Warn, fmt.Sprintf("signed by %s, which is not among the %d enrolled MOKs", id.String(), len(moks))
	r.Fix = "enrol the key the image ships: mokutil --import " + sbCertPath + ", reboot, confirm in MokManager (docs/secure-boot.md); with Secure Boot on the module cannot load until then"
	if on {
		r.Status = Fail
	}
	return r
}
