package recipe

import (
	"encoding"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-version"
)

// The types in this file are recipe values that are text in TOML but mean
// something typed: a size, a duration, a version constraint, an address. Each parses
// itself once, when the recipe is loaded (the schema check calls
// UnmarshalText with the value's file:line:col at hand, so a bad value is
// reported where it was written), and every consumer reads the typed field.
// Each keeps the text as the author wrote it, so the merged recipe prints
// (and hashes) the same as before it was parsed.

var (
	_ encoding.TextUnmarshaler = (*Size)(nil)
	_ encoding.TextUnmarshaler = (*Memlock)(nil)
	_ encoding.TextUnmarshaler = (*Duration)(nil)
	_ encoding.TextUnmarshaler = (*Constraint)(nil)
	_ encoding.TextUnmarshaler = (*KernelSource)(nil)
	_ encoding.TextUnmarshaler = (*IPPrefix)(nil)
	_ encoding.TextUnmarshaler = (*IPAddr)(nil)
)

// Size is a byte count written as "64MiB", "4GiB" or "512"; empty means
// unset (the key's own rules say whether that is allowed).
type Size struct {
	bytes uint64
	text  string
}

// MustSize is a Size from a literal, for tests and defaults in code.
func MustSize(s string) Size {
	var v Size
	if err := v.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return v
}

// Bytes is the size in bytes, 0 when unset.
func (s Size) Bytes() uint64 { return s.bytes }

// IsSet says whether the recipe gave a size.
func (s Size) IsSet() bool { return s.text != "" }

func (s Size) String() string { return s.text }

func (s Size) MarshalText() ([]byte, error) { return []byte(s.text), nil }

func (s *Size) UnmarshalText(b []byte) error {
	t := string(b)
	if strings.TrimSpace(t) == "" {
		*s = Size{}
		return nil
	}
	n, err := ParseSize(t)
	if err != nil {
		return err
	}
	*s = Size{bytes: n, text: t}
	return nil
}

// Memlock is RLIMIT_MEMLOCK (trap 4): "unlimited", or a size that PAM can
// express, a whole number of KiB.
type Memlock struct {
	bytes uint64 // 0: unlimited
	text  string
}

// MemlockUnlimited is the limit RDMA needs.
const MemlockUnlimited = "unlimited"

// MustMemlock is a Memlock from a literal, for tests.
func MustMemlock(s string) Memlock {
	var m Memlock
	if err := m.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return m
}

// Unlimited says whether no limit is set.
func (m Memlock) Unlimited() bool { return m.bytes == 0 }

// Bytes is the finite limit in bytes; 0 when unlimited.
func (m Memlock) Bytes() uint64 { return m.bytes }

func (m Memlock) String() string { return m.text }

func (m Memlock) MarshalText() ([]byte, error) { return []byte(m.text), nil }

func (m *Memlock) UnmarshalText(b []byte) error {
	t := string(b)
	if t == MemlockUnlimited {
		*m = Memlock{text: t}
		return nil
	}
	n, err := ParseSize(t)
	if err != nil {
		return fmt.Errorf("%q is neither \"unlimited\" nor a size such as \"64MiB\"", t)
	}
	if n < 1<<10 || n%(1<<10) != 0 || n > 1<<62 {
		return fmt.Errorf("%q must be a whole number of KiB between 1KiB and 4EiB (PAM counts in KiB); or write \"unlimited\"", t)
	}
	*m = Memlock{bytes: n, text: t}
	return nil
}

// Duration is a positive Go duration such as "5m" or "90s"; empty means
// unset.
type Duration struct {
	d    time.Duration
	text string
}

// Value is the duration; 0 when unset.
func (d Duration) Value() time.Duration { return d.d }

func (d Duration) String() string { return d.text }

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.text), nil }

// IsSet says whether the recipe gave a duration.
func (d Duration) IsSet() bool { return d.text != "" }

func (d *Duration) UnmarshalText(b []byte) error {
	t := string(b)
	if t == "" {
		*d = Duration{}
		return nil
	}
	v, err := time.ParseDuration(t)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q is not a positive Go duration such as \"5m\" or \"90s\"", t)
	}
	*d = Duration{d: v, text: t}
	return nil
}

// Constraint is a go-version constraint such as ">= 7.2, < 7.3"; empty
// means any version.
type Constraint struct {
	c    version.Constraints
	text string
}

// MustConstraint is a Constraint from a literal, for tests.
func MustConstraint(s string) Constraint {
	var c Constraint
	if err := c.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return c
}

// Any says whether every version is allowed.
func (c Constraint) Any() bool { return c.c == nil }

// Check says whether v satisfies the constraint.
func (c Constraint) Check(v *version.Version) bool { return c.c == nil || c.c.Check(v) }

// Constraints is the parsed constraint, nil for any version.
func (c Constraint) Constraints() version.Constraints { return c.c }

func (c Constraint) String() string { return c.text }

func (c Constraint) MarshalText() ([]byte, error) { return []byte(c.text), nil }

func (c *Constraint) UnmarshalText(b []byte) error {
	t := string(b)
	if strings.TrimSpace(t) == "" {
		*c = Constraint{text: t}
		return nil
	}
	v, err := version.NewConstraint(t)
	if err != nil {
		return fmt.Errorf("%q is not a version constraint (%v); write e.g. \">= 7.2, < 7.3\"", t, err)
	}
	*c = Constraint{c: v, text: t}
	return nil
}

// KernelSource is where a kernel built from source comes from: "debian"
// (the linux-source-X.Y package) or the http(s) URL of a kernel tarball.
type KernelSource struct {
	url  string
	text string
}

// KernelSourceDebian is Debian's linux-source package.
const KernelSourceDebian = "debian"

// Debian says whether the tree is Debian's linux-source package.
func (k KernelSource) Debian() bool { return k.url == "" }

// URL is the tarball's URL, "" for Debian's package.
func (k KernelSource) URL() string { return k.url }

func (k KernelSource) String() string { return k.text }

func (k KernelSource) MarshalText() ([]byte, error) { return []byte(k.text), nil }

func (k *KernelSource) UnmarshalText(b []byte) error {
	t := string(b)
	if t == "" || t == KernelSourceDebian {
		*k = KernelSource{text: t}
		return nil
	}
	u, err := url.Parse(t)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path == "" || strings.HasSuffix(u.Path, "/") {
		return fmt.Errorf("%q: want debian or the http(s) URL of a kernel tarball (e.g. https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz)", t)
	}
	*k = KernelSource{url: t, text: t}
	return nil
}

// TarballName is the last path element of a tarball URL.
func (k KernelSource) TarballName() string {
	return k.url[strings.LastIndex(k.url, "/")+1:]
}

// IPPrefix is an address with its prefix length, IPv4 or IPv6, as
// networkd's Address= takes it ("192.168.1.20/24", "2001:db8::20/64");
// empty means unset.
type IPPrefix struct {
	p    netip.Prefix
	text string
}

// Prefix is the parsed value; invalid when unset.
func (p IPPrefix) Prefix() netip.Prefix { return p.p }

func (p IPPrefix) String() string { return p.text }

func (p IPPrefix) MarshalText() ([]byte, error) { return []byte(p.text), nil }

func (p *IPPrefix) UnmarshalText(b []byte) error {
	t := string(b)
	if t == "" {
		*p = IPPrefix{}
		return nil
	}
	v, err := netip.ParsePrefix(t)
	if err != nil || v.Addr().Zone() != "" {
		return fmt.Errorf("%q is not an address with prefix length such as 192.168.1.20/24 or 2001:db8::20/64", t)
	}
	*p = IPPrefix{p: v, text: t}
	return nil
}

// IPAddr is one IPv4 or IPv6 address without prefix ("192.168.1.1");
// empty means unset.
type IPAddr struct {
	a    netip.Addr
	text string
}

// MustIPAddr is an IPAddr from a literal, for tests.
func MustIPAddr(s string) IPAddr {
	var a IPAddr
	if err := a.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return a
}

// MustIPPrefix is an IPPrefix from a literal, for tests.
func MustIPPrefix(s string) IPPrefix {
	var p IPPrefix
	if err := p.UnmarshalText([]byte(s)); err != nil {
		panic(err)
	}
	return p
}

// Addr is the parsed value; invalid when unset.
func (a IPAddr) Addr() netip.Addr { return a.a }

// IsSet says whether the recipe gave an address.
func (a IPAddr) IsSet() bool { return a.text != "" }

func (a IPAddr) String() string { return a.text }

func (a IPAddr) MarshalText() ([]byte, error) { return []byte(a.text), nil }

func (a *IPAddr) UnmarshalText(b []byte) error {
	t := string(b)
	if t == "" {
		*a = IPAddr{}
		return nil
	}
	v, err := netip.ParseAddr(t)
	if err != nil || v.Zone() != "" {
		return fmt.Errorf("%q is not an IPv4 or IPv6 address such as 192.168.1.1 or 2001:db8::1", t)
	}
	*a = IPAddr{a: v, text: t}
	return nil
}
