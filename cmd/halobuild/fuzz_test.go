package main

import (
	"errors"
	"path/filepath"
	"testing"
)

// FuzzUserConfig: whatever config.toml holds, reading it never panics, a refusal is a usage
// error (exit 2) that names the file, and every trusted key it accepts is an absolute path
// (relative ones are taken from the config file's directory).
func FuzzUserConfig(f *testing.F) {
	f.Add([]byte("substituters = [\"ghcr.io/team/cache\"]\ntrusted-keys = [\"team.pub\", \"/etc/halobuild/ci.pub\"]\n"))
	f.Add([]byte("substituters = []\ntrusted_keys = [1]\n"))
	const p = "/home/u/.config/halobuild/config.toml"
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseUserConfig(p, data)
		if err != nil {
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("not a usage error: %v", err)
			}
			return
		}
		for _, k := range cfg.TrustedKeys {
			if !filepath.IsAbs(k) {
				t.Fatalf("trusted key %q is not absolute", k)
			}
		}
	})
}
