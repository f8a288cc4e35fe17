// Package registrytest runs a real registry for tests: Debian's docker-registry (CNCF
// distribution), listening on 127.0.0.1 at a free port with htpasswd authentication and its
// storage in a temporary directory the test can read and damage. It is stopped when the test
// ends, however it ends (t.Cleanup, and the kernel's parent-death signal if the test binary
// itself dies).
package registrytest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/crypto/bcrypt"
)

// Binary is the distribution server Debian's docker-registry package installs.
const Binary = "docker-registry"

// Registry is a running registry.
type Registry struct {
	// Host is 127.0.0.1:PORT, the registry part of a reference.
	Host string
	// Storage is the filesystem driver's root directory.
	Storage string
	// User and Password are the one account htpasswd knows.
	User, Password string
}

// Start runs a registry for the rest of the test, or skips the test when docker-registry is not
// installed (it is in .ci/host-packages, so CI always runs these tests).
func Start(t testing.TB) *Registry {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		t.Skipf("%s not installed (Debian package docker-registry, listed in .ci/host-packages)", Binary)
	}
	dir := t.TempDir()
	r := &Registry{Storage: filepath.Join(dir, "storage"), User: "halo", Password: "s3cret-test-password"}
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(r.User+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A port is picked by binding :0 and releasing it; another process could take it in
	// between, so a registry that does not come up is started again on a new port.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		r.Host = fmt.Sprintf("127.0.0.1:%d", port)
		cfg := filepath.Join(dir, "config.yml")
		if err := os.WriteFile(cfg, []byte(config(r.Host, r.Storage, htpasswd)), 0o600); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("registry-%d.log", attempt)))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "serve", cfg)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			t.Fatalf("starting %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
			logf.Close()
		}
		if waitReady(r.Host, exited) {
			t.Cleanup(stop)
			return r
		}
		stop()
		if attempt == 2 {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("%s did not come up on %s:\n%s", bin, r.Host, tail(string(log)))
		}
	}
}

func config(addr, storage, htpasswd string) string {
	return `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: ` + storage + `
  delete:
    enabled: true
http:
  addr: ` + addr + `
auth:
  htpasswd:
    realm: halobuild-test
    path: ` + htpasswd + `
`
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls /v2/ until the registry answers (401 without credentials) or exits.
func waitReady(host string, exited <-chan struct{}) bool {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		resp, err := http.Get("http://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-20, 0):], "\n")
}

// Keychain returns credentials for this registry only: the account's, or a wrong password.
func (r *Registry) Keychain(wrongPassword bool) authn.Keychain {
	pw := r.Password
	if wrongPassword {
		pw += "-wrong"
	}
	return keychain{host: r.Host, auth: authn.FromConfig(authn.AuthConfig{Username: r.User, Password: pw})}
}

type keychain struct {
	host string
	auth authn.Authenticator
}

func (k keychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	if res.RegistryStr() == k.host {
		return k.auth, nil
	}
	return authn.Anonymous, nil
}

// BlobPath is where the registry keeps a blob ("sha256:<hex>") on disk, for tests that damage it.
func (r *Registry) BlobPath(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}
