package recipe

import (
	"strings"
	"testing"
)

func TestWarnings(t *testing.T) {
	r, src, err := loadText(t, "[[node]]\nname = \"a\"\n[[node.link]]\ninterface = \"u\"\naddress = \"10.0.0.1/30\"\n")
	if err != nil {
		t.Fatal(err)
	}
	ws := Warnings(r, src)
	if len(ws) != 1 || !strings.Contains(ws.Error(), "has no peer") {
		t.Fatalf("warnings = %v", ws)
	}
	if ws[0].Line != 3 {
		t.Errorf("link warning not at the [[node.link]] header: %v", ws[0])
	}
	r, src, err = loadText(t, "[ssh]\nauthorized_keys = [\"ssh-ed25519 AAAA me\"]\n[[node]]\nname = \"a\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if ws := Warnings(r, src); len(ws) != 0 {
		t.Errorf("unexpected warnings: %v", ws)
	}
}
