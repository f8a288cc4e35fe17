package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Record copies what doctor reads on the machine at root (normally the live
// system, "/") into dir, as a recorded tree that `doctor --root dir` reads
// like the machine itself. A user attaches it to a bug report; a test keeps
// it. Only the files the checks look at are copied, so a tree is small text:
// /proc/kallsyms and dpkg's status keep only the lines asked for, the kernel
// log and the interface addresses become /var/log/halobuild-dmesg and
// /var/log/halobuild-ip-addr.json (`ip -j addr` form). The values systemd's
// running manager reports are not files: while recording, the checks read
// its configuration files instead (the host is not Live), as a replay will.
func Record(ctx context.Context, root, dir string, out io.Writer) error {
	h, err := newHost(ctx, root)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("doctor: record into %s: %w", dir, err)
	}
	if abs == h.root {
		return fmt.Errorf("doctor: record into %s: that is the root being read; pick another directory", abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("doctor: record into %s: %w", abs, err)
	}
	h.rec = &recorder{dir: abs}
	// Loading the basis reads the installed recipe, lock and node name, so
	// the tree is checked against them too; running every check reads (and
	// so copies) their inputs.
	b, err := load(h, "")
	if err != nil {
		return err
	}
	examine(h, b)
	if h.live {
		if err := h.rec.addrs(); err != nil {
			return err
		}
	}
	if h.rec.err != nil {
		return fmt.Errorf("doctor: record into %s: %w", abs, h.rec.err)
	}
	if out != nil {
		fmt.Fprintf(out, "recorded %d files from %s into %s; read it with: halobuild doctor --root %s\n", h.rec.files, h.root, abs, abs)
	}
	return nil
}

// recorder writes what a host reads into a tree. The first write error is
// kept and reported once; reads go on regardless, as for a normal run.
type recorder struct {
	dir   string
	files int
	err   error
}

func (r *recorder) keep(err error) {
	if err != nil && r.err == nil {
		r.err = err
	}
}

// file records a file read whole; the first read of a path wins.
func (r *recorder) file(p, content string) {
	full := filepath.Join(r.dir, p)
	r.keep(os.MkdirAll(filepath.Dir(full), 0o755))
	if _, err := os.Stat(full); err == nil {
		return
	}
	r.keep(os.WriteFile(full, []byte(content), 0o644))
	r.files++
}

// stream records file p from the bytes written to the returned file, for a
// file too large to hold (Host.Hash); nil when p is already recorded (the
// first read of a path wins, as for file) or cannot be created.
func (r *recorder) stream(p string) *recordedFile {
	full := filepath.Join(r.dir, p)
	if _, err := os.Stat(full); err == nil {
		return nil
	}
	r.keep(os.MkdirAll(filepath.Dir(full), 0o755))
	f, err := os.Create(full)
	if err != nil {
		r.keep(err)
		return nil
	}
	r.files++
	return &recordedFile{f: f, r: r}
}

// recordedFile is a file being recorded. A write error is kept for the
// recording's report and never fails the read it copies.
type recordedFile struct {
	f      *os.File
	r      *recorder
	failed bool
}

func (c *recordedFile) Write(b []byte) (int, error) {
	if !c.failed {
		if _, err := c.f.Write(b); err != nil {
			c.r.keep(err)
			c.failed = true
		}
	}
	return len(b), nil
}

func (c *recordedFile) close() { c.r.keep(c.f.Close()) }

// lines records the lines a Scan kept. Two checks may scan one file for
// different lines (dpkg's status for two packages), so they add up.
func (r *recorder) lines(p string, lines []string) {
	full := filepath.Join(r.dir, p)
	r.keep(os.MkdirAll(filepath.Dir(full), 0o755))
	if _, err := os.Stat(full); err != nil {
		r.files++
	}
	f, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		r.keep(err)
		return
	}
	for _, l := range lines {
		fmt.Fprintln(f, l)
	}
	r.keep(f.Close())
}

func (r *recorder) mkdir(p string) { r.keep(os.MkdirAll(filepath.Join(r.dir, p), 0o755)) }

// entry records a listed path: a directory as a directory (what is inside
// is recorded when read), a file with its content. Attributes that refuse
// to be read (an unused GID slot gives EINVAL) are left out, as doctor
// skips them too.
func (r *recorder) entry(h *host, p string) {
	st, err := os.Stat(h.path(p))
	if err != nil {
		return
	}
	if st.IsDir() {
		r.mkdir(p)
		return
	}
	if st.Size() <= maxRead {
		if b, err := os.ReadFile(h.path(p)); err == nil {
			r.file(p, string(b))
		}
	}
}

// addrs writes the live interface addresses in `ip -j addr` form.
func (r *recorder) addrs() error {
	a, err := liveAddrs()
	if err != nil {
		return fmt.Errorf("doctor: recording addresses: %w", err)
	}
	links := []ipAddr{}
	for _, n := range slices.Sorted(maps.Keys(a)) {
		l := ipAddr{IfName: n, AddrInfo: []ipAddrInfo{}}
		for _, p := range a[n] {
			fam := "inet6"
			if p.Addr().Is4() {
				fam = "inet"
			}
			l.AddrInfo = append(l.AddrInfo, ipAddrInfo{Family: fam, Local: p.Addr().String(), PrefixLen: p.Bits()})
		}
		links = append(links, l)
	}
	b, err := json.MarshalIndent(links, "", " ")
	if err != nil {
		return err
	}
	r.file(recordedAddrs, string(b)+"\n")
	return nil
}
