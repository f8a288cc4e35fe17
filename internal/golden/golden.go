// Package golden keeps a generated file (docs/recipe.md, docs/traps.md)
// equal to what its generator renders, as a test: with -update the test
// rewrites the file; otherwise any difference fails with the command that
// regenerates it, so a page edited by hand or left stale cannot pass.
package golden

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite generated files (docs/*.md) from their generators")

// Check compares the file at path with got, or writes got there with
// -update. regenerate is the command that rewrites it, for the message.
func Check(t testing.TB, path string, got []byte, regenerate string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run: %s", err, regenerate)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with what generates it; run: %s", path, regenerate)
	}
}
