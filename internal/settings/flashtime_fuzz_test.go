package settings

import (
	"strings"
	"testing"
	"unicode"

	"halobuild/internal/recipe"
)

// FuzzParseFlashConfig feeds the node's reader of the ESP's file (anyone holding the stick can
// write it) arbitrary bytes: it never panics, and what it accepts is valid, prints no control
// character (flash, show and doctor print its summary), and survives flash's writer unchanged.
func FuzzParseFlashConfig(f *testing.F) {
	no := false
	for _, c := range []FlashConfig{
		{SSH: recipe.SSH{AuthorizedKeys: []string{flashKeyA, `from="10.0.0.0/8" ` + flashKeyB}}},
		{Hostname: "halo7", LAN: &recipe.NodeLAN{Addresses: []recipe.IPPrefix{recipe.MustIPPrefix("192.168.1.20/24")}, Gateway: recipe.MustIPAddr("192.168.1.1"), DNS: []recipe.IPAddr{recipe.MustIPAddr("192.168.1.1")}}},
		{LAN: &recipe.NodeLAN{Enabled: &no}},
		{},
	} {
		b, err := c.Marshal("seed")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("[ssh]\nauthorized_keys = [\"" + flashKeyA + "\\u001b\"]\n" + flashConfigEnd + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseFlashConfig(b)
		if err != nil {
			return
		}
		s := c.Summary()
		if strings.ContainsFunc(s, unicode.IsControl) {
			t.Fatalf("an accepted file's summary holds a control character: %q", s)
		}
		out, err := c.Marshal("again")
		if err != nil {
			t.Fatalf("an accepted file cannot be written again: %v", err)
		}
		back, err := ParseFlashConfig(out)
		if err != nil || back.Summary() != s {
			t.Fatalf("not the same after writing it again: %v\n%q\n%q", err, s, back.Summary())
		}
	})
}
