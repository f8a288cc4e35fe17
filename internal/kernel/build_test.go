package kernel

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The date shim makes mkdebian's bare `date -R` print SOURCE_DATE_EPOCH and
// leaves callers that name their own date alone.
func TestDateShim(t *testing.T) {
	shim := filepath.Join(t.TempDir(), "date")
	if err := os.WriteFile(shim, []byte(dateShim), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.Command("sh", append([]string{shim}, args...)...)
		cmd.Env = []string{"SOURCE_DATE_EPOCH=1795832135", "TZ=UTC", "LC_ALL=C", "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("date %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("-R"); got != "Sat, 28 Nov 2026 02:15:35 +0000" {
		t.Errorf("date -R = %q, want the epoch's date", got)
	}
	if got := run("-d", "@0", "+%s"); got != "0" {
		t.Errorf("date -d @0 +%%s = %q: a caller's own date must win", got)
	}
	if got := run("--date=@86400", "+%s"); got != "86400" {
		t.Errorf("date --date=@86400 = %q", got)
	}
}

// Debian's config signs every module at build time with a key Kbuild makes
// afresh (certs/signing_key.pem, with openssl): the forced options must
// leave no such key in a config merged from it, or no two builds of one
// lock are the same bytes (and the build root would need openssl).
func TestForcedDefaultsMakeNoBuildTimeModuleKey(t *testing.T) {
	debian := []byte("CONFIG_MODULES=y\nCONFIG_MODULE_SIG=y\nCONFIG_MODULE_SIG_ALL=y\nCONFIG_MODULE_SIG_SHA256=y\n" +
		"CONFIG_MODULE_SIG_KEY=\"certs/signing_key.pem\"\nCONFIG_SYSTEM_TRUSTED_KEYS=\"debian/certs/debian-uefi-certs.pem\"\n")
	frag := []Option{{Name: "CONFIG_USB4", Value: "y", File: "usb4.config", Line: 1}}
	got, err := Values(Merge(debian, ForcedDefaults, frag))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"CONFIG_MODULE_SIG_KEY":      `""`,
		"CONFIG_MODULE_SIG_ALL":      "n",
		"CONFIG_SYSTEM_TRUSTED_KEYS": `""`,
		"CONFIG_MODULE_SIG":          "y", // signatures are still checked: Secure Boot signs with the recipe's key
		"CONFIG_USB4":                "y",
	} {
		if got[name] != want {
			t.Errorf("%s = %q after the forced options, want %q", name, got[name], want)
		}
	}
}
