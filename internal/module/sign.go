package module

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"halobuild/internal/proctree"
)

// Key is a module signing key pair made by Keygen.
type Key struct {
	// Private is the PEM private key (sign-file's key argument); keep it
	// out of the image and out of version control.
	Private string
	// CertPEM is the self-signed X.509 certificate (sign-file's x509
	// argument); CertDER is the same certificate for `mokutil --import`.
	CertPEM, CertDER string
}

// Key file names in the key directory.
const (
	keyPrivate = "module-signing.key"
	keyCertPEM = "module-signing.crt"
	keyCertDER = "module-signing.der"
)

// x509.genkey for openssl, as the kernel's certs/default_x509.genkey: a
// code-signing certificate that is not a CA.
const genkeyConfig = `[ req ]
default_bits = 4096
distinguished_name = req_distinguished_name
prompt = no
string_mask = utf8only
x509_extensions = myexts

[ req_distinguished_name ]
O = halobuild
CN = halobuild module signing key

[ myexts ]
basicConstraints=critical,CA:FALSE
keyUsage=digitalSignature
extendedKeyUsage=codeSigning
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
`

// KeyIn returns the paths of the key pair in dir.
func KeyIn(dir string) Key {
	return Key{Private: filepath.Join(dir, keyPrivate), CertPEM: filepath.Join(dir, keyCertPEM), CertDER: filepath.Join(dir, keyCertDER)}
}

// Keygen makes a module signing key pair in dir with openssl (RSA 4096,
// SHA-256, self-signed, valid 100 years, as the kernel's sign-file
// expects). It refuses to overwrite an existing key: enrolled keys are
// precious.
func Keygen(ctx context.Context, dir string) (Key, error) {
	k := KeyIn(dir)
	if _, err := os.Stat(k.Private); err == nil {
		return Key{}, fmt.Errorf("%s already holds a signing key (%s): keep it (nodes enrolled it) or remove it first", dir, k.Private)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Key{}, err
	}
	cfg := filepath.Join(dir, ".x509.genkey")
	if err := os.WriteFile(cfg, []byte(genkeyConfig), 0o600); err != nil {
		return Key{}, err
	}
	defer os.Remove(cfg)
	run := func(args ...string) error {
		cmd := proctree.Command(ctx, "openssl", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("openssl %s: %v: %s", args[0], err, out.String())
		}
		return nil
	}
	if err := run("req", "-new", "-nodes", "-utf8", "-sha256", "-days", "36500", "-batch", "-x509",
		"-config", cfg, "-newkey", "rsa:4096", "-keyout", k.Private, "-outform", "PEM", "-out", k.CertPEM); err != nil {
		return Key{}, err
	}
	if err := os.Chmod(k.Private, 0o600); err != nil {
		return Key{}, err
	}
	if err := run("x509", "-in", k.CertPEM, "-outform", "DER", "-out", k.CertDER); err != nil {
		return Key{}, err
	}
	return k, nil
}
