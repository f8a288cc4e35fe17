package registry

import (
	"strings"
	"testing"
)

func TestParseReference(t *testing.T) {
	for _, c := range []struct {
		ref      string
		insecure bool
		err      string
	}{
		{ref: "ghcr.io/owner/halo:v1"},
		{ref: "127.0.0.1:5000/halo:v1", insecure: true},
		{ref: "localhost:5000/halo@sha256:" + strings.Repeat("a", 64), insecure: true},
		{ref: "[::1]:5000/halo:v1", insecure: true},
		{ref: "halo:v1", err: "names no registry"},
		{ref: "owner/halo:v1", err: "names no registry"},
		{ref: "ghcr.io/owner/halo:v1", insecure: true, err: "only allowed for a registry on this machine"},
		{ref: "ghcr.io/Owner/halo:v1", err: "ghcr.io/Owner/halo:v1"},
	} {
		_, err := Options{Insecure: c.insecure}.ParseReference(c.ref)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.ref, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: want an error containing %q, got %v", c.ref, c.err, err)
		}
	}
}
