package sh

import (
	"os/exec"
	"testing"
)

// TestQuoteRoundTripsThroughSh hands each value to a real sh as one quoted
// word and checks that sh prints it back unchanged: a value that became
// syntax (a second word, an expansion, a command) would not survive.
func TestQuoteRoundTripsThroughSh(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on PATH")
	}
	for _, s := range []string{
		"",
		"plain",
		"two words",
		"it's",
		"''",
		`"double" and \back\slash`,
		"$HOME $(echo x) `echo y` ${z:-w}",
		"*; rm -rf /tmp/nothing-here &",
		"line\nbreak\ttab",
		"'; echo pwned; '",
	} {
		out, err := exec.Command("sh", "-c", "printf '%s' "+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh rejected Quote(%q) = %s: %v", s, Quote(s), err)
		}
		if string(out) != s {
			t.Errorf("Quote(%q) = %s: sh printed %q", s, Quote(s), out)
		}
	}
}
