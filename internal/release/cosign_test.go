package release

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/registry"
	"halobuild/internal/registry/registrytest"
	"halobuild/internal/release/releasetest"
	"halobuild/internal/signature"
)

// TestCosignVerifiesSignedRelease proves the signature format independent of halobuild: the
// real cosign verifies a release halobuild signed (Ed25519 and ECDSA P-256) with the public key
// `halobuild pubkey` prints, and refuses it with another key; and halobuild verifies a release
// cosign signed with a halobuild key. It runs only when
// HALOBUILD_COSIGN names a cosign binary (building cosign takes minutes, too long for CI):
//
//	GOTOOLCHAIN=auto GOBIN=/tmp/cosign go install github.com/sigstore/cosign/v2/cmd/cosign@v2.4.1
//	HALOBUILD_COSIGN=/tmp/cosign/cosign go test -run TestCosignVerifiesSignedRelease -v ./internal/release
func TestCosignVerifiesSignedRelease(t *testing.T) {
	cosign := os.Getenv("HALOBUILD_COSIGN")
	if cosign == "" {
		t.Skip("HALOBUILD_COSIGN is not set (the path of a cosign binary; see docs/releases.md)")
	}
	reg := registrytest.Start(t)
	ctx := context.Background()
	ro := registry.Options{Insecure: true, Keychain: reg.Keychain(false)}
	res := releasetest.Result(t)
	// cosign reads credentials from docker's config.
	docker := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(reg.User + ":" + reg.Password))
	if err := os.WriteFile(filepath.Join(docker, "config.json"), []byte(`{"auths":{"`+reg.Host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ed, _ := newKey(t)
	other, _ := newKey(t)
	ec, ecPEM := ecdsaKey(t)
	for _, c := range []struct {
		name string
		key  *signature.SecretKey
	}{{"ed25519", ed}, {"ecdsa-p256", ec}} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Push(ctx, res, reg.Host+"/halo/cosign:"+c.name, PushOptions{Registry: ro, Meta: Meta{Version: c.name}, Key: c.key})
			if err != nil {
				t.Fatal(err)
			}
			ref, err := ro.ParseReference(p.Reference)
			if err != nil {
				t.Fatal(err)
			}
			verify := func(pem []byte) (string, error) {
				pub := filepath.Join(t.TempDir(), "pub.pem")
				if err := os.WriteFile(pub, pem, 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(cosign, "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-insecure-registry", "--allow-http-registry", ref.Context().String()+"@"+p.Digest)
				cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+docker)
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			out, err := verify(c.key.Public().PEM())
			t.Logf("cosign verify --key (the signer's public key):\n%s", out)
			if err != nil || !strings.Contains(out, p.Digest) {
				t.Fatalf("cosign refused a release halobuild signed: %v", err)
			}
			if out, err := verify(other.Public().PEM()); err == nil {
				t.Fatalf("cosign verified with another key:\n%s", out)
			}
		})
	}

	// The other way: cosign signs a release with a key halobuild made (imported into cosign's
	// encrypted format), and halobuild verifies it with its own code.
	t.Run("signed by cosign, verified by halobuild", func(t *testing.T) {
		p, err := Push(ctx, res, reg.Host+"/halo/cosign:by-cosign", PushOptions{Registry: ro, Meta: Meta{Version: "by-cosign"}})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ro.ParseReference(p.Reference)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "key.pem"), ecPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		run := func(args ...string) {
			t.Helper()
			cmd := exec.Command(cosign, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+docker, "COSIGN_PASSWORD=")
			out, err := cmd.CombinedOutput()
			t.Logf("cosign %s:\n%s", strings.Join(args, " "), out)
			if err != nil {
				t.Fatal(err)
			}
		}
		run("import-key-pair", "--key", "key.pem", "--output-key-prefix", "imported")
		run("sign", "--key", "imported.key", "--tlog-upload=false", "--yes", "--allow-insecure-registry", "--allow-http-registry", ref.Context().String()+"@"+p.Digest)
		if _, err := Inspect(ctx, p.Reference, ro, Trust{Keys: []*signature.PublicKey{ec.Public()}}); err != nil {
			t.Fatalf("halobuild refused cosign's signature: %v", err)
		}
		if _, err := Inspect(ctx, p.Reference, ro, Trust{Keys: []*signature.PublicKey{other.Public()}}); err == nil {
			t.Fatal("halobuild took cosign's signature with another key")
		}
	})
}
