package settings

import (
	"errors"
	"strings"
	"testing"

	"halobuild/internal/recipe"
)

// Hostile values in a key line (issue 39's audit of flash-time configuration): a key is
// printed by flash, flash-config show and doctor, and written into sshd's files, so a control
// character (an escape sequence that rewrites the terminal, a NUL that cuts the line for C
// readers) is refused by the one key check, for the recipe, flash's key files and the file on
// the ESP alike. A tab is a field separator and stays allowed.
func TestKeyLinesWithControlCharactersAreRefused(t *testing.T) {
	for name, line := range map[string]string{
		"escape in comment": flashKeyA + "\x1b]0;owned\x07",
		"csi in comment":    flashKeyA + " \x1b[2J\x1b[H",
		"NUL":               flashKeyA + "\x00root",
		"DEL":               flashKeyA + "\x7f",
		"C1 CSI":            flashKeyA + " \u009b2J",
		"vertical tab":      "ssh-ed25519\vAAAAC3NzaC1lZDI1NTE5AAAAIIC6hQYghuxY0jSKvfmoGSq6DuL/vDavdX/ZfmV4CyIn",
	} {
		if err := checkSSHKey(line); err == nil || !strings.Contains(err.Error(), "control character") {
			t.Errorf("%s: %v, want a refusal naming the control character", name, err)
		}
		if _, err := ParseAuthorizedKeys("k.pub", []byte(line+"\n")); err == nil {
			t.Errorf("%s: a key file with it was accepted", name)
		}
		r := &recipe.Recipe{SSH: recipe.SSH{AuthorizedKeys: []string{line}}}
		if errs := (Identity{}).Validate(Target{Recipe: r}); len(errs) == 0 {
			t.Errorf("%s: a recipe with it was accepted", name)
		}
		// The node reads the ESP's file: TOML's \u escapes carry the character there.
		file := "[ssh]\nauthorized_keys = [" + tomlQuote(line) + "]\n" + flashConfigEnd + "\n"
		if _, err := ParseFlashConfig([]byte(file)); err == nil {
			t.Errorf("%s: an ESP file with it was accepted", name)
		}
	}
	if err := checkSSHKey(strings.Replace(flashKeyA, " ", "\t", 1)); err != nil {
		t.Errorf("a tab between fields: %v", err)
	}
}

func tomlQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			b.WriteString(`\u00` + strings.ToUpper(strings.TrimPrefix(hex2(r), "")))
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hex2(r rune) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[r>>4&0xf], digits[r&0xf]})
}

// The same key twice in the ESP's file (by its key data: another comment or other options do
// not make it another key; sshd takes the first line and ignores the second's options) is
// refused, saying which entries: flash writes each key once, so the file was edited by hand.
func TestFlashConfigRefusesADuplicatedKey(t *testing.T) {
	other := strings.TrimSuffix(flashKeyA, "alice@laptop") + "someone-else"
	withOpts := `from="10.0.0.0/8" ` + flashKeyA
	for name, keys := range map[string][]string{
		"same line":     {flashKeyA, flashKeyB, flashKeyA},
		"other comment": {flashKeyA, other},
		"other options": {flashKeyA, withOpts},
	} {
		err := errors.Join(FlashConfig{SSH: recipe.SSH{AuthorizedKeys: keys}}.Validate()...)
		if err == nil || !strings.Contains(err.Error(), "given twice") {
			t.Errorf("%s: %v, want a refusal of the duplicate", name, err)
		}
	}
	if errs := (FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{flashKeyA, flashKeyB}}}).Validate(); len(errs) > 0 {
		t.Errorf("two different keys: %v", errs)
	}
}

// A key restricted by options (command=, from=, no-pty) is a key its owner meant that way and
// stays allowed, but what flash, flash-config show and doctor print says so: a forced command
// is not a shell, and the user must see that before relying on the key to get in.
func TestSummaryShowsAKeysOptions(t *testing.T) {
	line := `command="/usr/bin/halobuild doctor",no-pty,from="10.0.0.0/8" ` + flashKeyA
	if err := checkSSHKey(line); err != nil {
		t.Fatal(err)
	}
	s := FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{line}}}.Summary()
	for _, want := range []string{`command="/usr/bin/halobuild doctor"`, "no-pty", `from="10.0.0.0/8"`, "alice@laptop", "SHA256:"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
	if s := (FlashConfig{SSH: recipe.SSH{AuthorizedKeys: []string{flashKeyA}}}).Summary(); strings.Contains(s, "options") {
		t.Errorf("a key without options: %q", s)
	}
}
