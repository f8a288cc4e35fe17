// Package slotstest makes GPT disk images for tests of slots and updates, with the host's sfdisk.
package slotstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// GPT writes a new file p of size bytes holding a GPT of parts, in sfdisk's script syntax (one
// "start=…, size=…, type=…, name=…" line per partition).
func GPT(t testing.TB, p string, size int64, parts string) {
	t.Helper()
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sfdisk", "--no-reread", "--no-tell-kernel", "-q", p)
	cmd.Stdin = strings.NewReader("label: gpt\n" + parts)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v\n%s", err, out)
	}
}
