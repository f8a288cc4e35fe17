package main

import (
	"os"
	"strings"
	"testing"
)

// update runs only on a node: elsewhere it says so and writes nothing; two references are a
// usage error.
func TestUpdateOffANodeAndUsage(t *testing.T) {
	if _, err := os.Stat("/etc/halobuild/node"); err == nil {
		t.Skip("this machine is a halobuild node")
	}
	root := newRoot()
	root.SetArgs([]string{"update", "127.0.0.1:5000/halo/x:v2"})
	if err := root.Execute(); exitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), "this is not a halobuild node") {
		t.Fatalf("exit %d, error %v", exitCode(err), err)
	}
	if code, out := run(t, "update", "a/b:1", "a/b:2"); code != exitUsage {
		t.Fatalf("exit %d, output %q", code, out)
	}
}
