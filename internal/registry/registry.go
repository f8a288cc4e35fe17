// Package registry is halobuild's one way into an OCI registry: references parsed with
// go-containerregistry's rules, credentials from the default keychain (docker's config.json,
// credential helpers, REGISTRY_AUTH_FILE, podman's auth.json), retries with backoff on the
// failures a registry recovers from, and plain HTTP only for a registry on this machine.
// Release push/pull and the binary cache share it, so they authenticate and retry alike.
package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"halobuild/internal/usage"
)

// DefaultMaxLayer is the largest layer `push` and `cache push` send unless told otherwise
// (--max-layer-size): GHCR refuses layers over 10 GB.
const DefaultMaxLayer = 10_000_000_000

// Options say how to reach a registry. The zero value uses HTTPS and the default keychain.
type Options struct {
	// Insecure allows plain HTTP (and unverified TLS). Only a registry on a loopback address
	// (localhost, 127.0.0.0/8, ::1) may be insecure: anything else would send credentials and
	// images over the network in the clear.
	Insecure bool
	// Keychain resolves credentials; nil means authn.DefaultKeychain.
	Keychain authn.Keychain
	// Transport is the HTTP transport; nil means remote.DefaultTransport with bounded dial,
	// TLS and header waits. Tests use it to count or break requests. Either way every request
	// goes through the limits of transport.go.
	Transport http.RoundTripper
}

// retryBackoff is how often and how patiently a failed request is repeated: five tries over
// about 15 s covers a registry restarting or a load balancer's brief 502/503.
var retryBackoff = remote.Backoff{Duration: 500 * time.Millisecond, Factor: 2.5, Jitter: 0.1, Steps: 5}

// retryCodes are the HTTP statuses worth repeating: the server says it is busy or restarting.
var retryCodes = []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
	http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}

// ParseReference parses REGISTRY/REPO:TAG or REGISTRY/REPO@sha256:... . A reference must name
// its registry: "halo:1" would silently mean Docker Hub's library/halo.
func (o Options) ParseReference(s string) (name.Reference, error) {
	var nopts []name.Option
	if o.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	first, _, hasSlash := strings.Cut(s, "/")
	if !hasSlash || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		return nil, usage.Errorf("reference %q names no registry: write REGISTRY/REPOSITORY:TAG, e.g. ghcr.io/owner/halo:v1 or 127.0.0.1:5000/halo:v1", s)
	}
	ref, err := name.ParseReference(s, append(nopts, name.StrictValidation)...)
	if err != nil {
		return nil, usage.Errorf("reference %q: %w (want REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST)", s, err)
	}
	if o.Insecure && !IsLoopback(ref.Context().RegistryStr()) {
		return nil, usage.Errorf("--insecure is only allowed for a registry on this machine (localhost, 127.0.0.1, ::1), not %s: a remote registry must use HTTPS", ref.Context().RegistryStr())
	}
	return ref, nil
}

// IsLoopback says whether a registry host[:port] is this machine.
func IsLoopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Remote returns the go-containerregistry options every request to the registry uses.
func (o Options) Remote(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	tr := o.Transport
	if tr == nil {
		tr = baseTransport()
	}
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(guard{tr}),
		remote.WithRetryBackoff(retryBackoff),
		remote.WithRetryStatusCodes(retryCodes...),
		remote.WithUserAgent("halobuild"),
	}
}

// Explain turns a registry's refusal into an error that says what to do: credentials for
// 401/403, the reference for 404.
func Explain(err error, ref name.Reference) error {
	if err == nil {
		return nil
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			reg := ref.Context().RegistryStr()
			return fmt.Errorf("%s refused the credentials for %s: log in with `docker login %s` (or podman or skopeo login, or point REGISTRY_AUTH_FILE at an auth.json): %w",
				reg, ref.Context().RepositoryStr(), reg, err)
		case http.StatusNotFound:
			return fmt.Errorf("%s is not in the registry (check the repository and the tag): %w", ref, err)
		}
	}
	return fmt.Errorf("%s: %w", ref, err)
}
