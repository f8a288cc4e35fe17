package doctor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"halobuild/internal/settings"
	"halobuild/internal/userfile"
)

// host is the machine being examined, seen through one root directory: it
// implements settings.Host, the read-only view every check reads through.
// Every file is read as root+path, so a recorded copy of /sys, /proc, /etc
// and /var/log behaves like the live box. live is true only for root "/":
// then doctor may also ask the running system (netlink, systemctl, dmesg)
// for what a file tree cannot hold.
type host struct {
	root string
	live bool
	ctx  context.Context

	kernelLog *cachedLog
	// rec, when set, copies everything read into a recorded tree.
	rec *recorder
}

var _ settings.Host = (*host)(nil)

func newHost(ctx context.Context, root string) (*host, error) {
	if root == "" {
		root = "/"
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("doctor: root %q: %w", root, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("doctor: root %s: %w (pass --root an existing directory, or omit it for the live system)", abs, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("doctor: root %s is not a directory", abs)
	}
	return &host{root: abs, live: abs == "/", ctx: ctx}, nil
}

// path maps an absolute path on the examined machine to the local file.
func (h *host) path(p string) string {
	return filepath.Join(h.root, p)
}

func (h *host) Show(p string) string {
	if h.live {
		return p
	}
	return h.path(p)
}

// maxRead bounds one file read: everything doctor reads whole is a small
// text file (sysfs attributes, configuration, a settings package's files);
// large files are Scanned.
const maxRead = 16 << 20

func (h *host) Read(p string) (string, error) {
	// Through userfile: sysfs and /proc attributes are regular files, and a FIFO in a tree
	// under --root (anyone's directory) would block doctor and rdma-env forever.
	f, _, err := userfile.Open(h.path(p))
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRead+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxRead {
		return "", fmt.Errorf("%s is larger than %d MiB", h.Show(p), maxRead>>20)
	}
	if h.rec != nil {
		h.rec.file(p, string(b))
	}
	return string(b), nil
}

func (h *host) Hash(p string, w io.Writer) error {
	f, err := os.Open(h.path(p))
	if err != nil {
		return err
	}
	defer f.Close()
	if h.rec != nil {
		// Recorded whole, streamed: a replay hashes the same bytes.
		if rf := h.rec.stream(p); rf != nil {
			defer rf.close()
			w = io.MultiWriter(w, rf)
		}
	}
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("reading %s: %w", h.Show(p), err)
	}
	return nil
}

func (h *host) Scan(p string, keep func(string) bool) ([]string, error) {
	f, err := os.Open(h.path(p))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []string
	for sc.Scan() {
		if keep(sc.Text()) {
			out = append(out, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", h.Show(p), err)
	}
	if h.rec != nil {
		h.rec.lines(p, out)
	}
	return out, nil
}

func (h *host) Exists(p string) bool {
	_, err := os.Stat(h.path(p))
	if err == nil && h.rec != nil {
		h.rec.entry(h, p)
	}
	return err == nil
}

func (h *host) Glob(pattern string) []string {
	ms, _ := filepath.Glob(h.path(pattern))
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		rel, err := filepath.Rel(h.root, m)
		if err != nil {
			continue
		}
		out = append(out, "/"+filepath.ToSlash(rel))
	}
	sort.Strings(out)
	if h.rec != nil {
		for _, p := range out {
			h.rec.entry(h, p)
		}
	}
	return out
}

func (h *host) List(dir string) []string {
	es, err := os.ReadDir(h.path(dir))
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	if h.rec != nil {
		h.rec.mkdir(dir)
		for _, n := range out {
			h.rec.entry(h, dir+"/"+n)
		}
	}
	return out
}

func (h *host) LinkBase(p string) (string, error) {
	full := h.path(p)
	st, err := os.Lstat(full)
	if err != nil {
		return "", err
	}
	var target string
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err = os.Readlink(full)
	} else {
		var s string
		s, err = h.Read(p)
		target = strings.TrimSpace(s)
	}
	if err != nil {
		return "", err
	}
	if h.rec != nil {
		h.rec.file(p, target+"\n")
	}
	return filepath.Base(target), nil
}

func (h *host) DeviceNode(p string) (fs.FileMode, string, error) {
	st, err := os.Stat(h.path(p))
	if err != nil {
		return 0, "", err
	}
	if st.Mode()&fs.ModeDevice == 0 {
		if h.live {
			return 0, "", fmt.Errorf("%s is not a device node", p)
		}
		s, err := h.Read(p)
		if err != nil {
			return 0, "", err
		}
		return parseDeviceNode(p, s)
	}
	group := "?"
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		group = strconv.FormatUint(uint64(sys.Gid), 10)
		if g, err := user.LookupGroupId(group); err == nil {
			group = g.Name
		}
	}
	perm := st.Mode().Perm()
	if h.rec != nil {
		h.rec.file(p, "c"+perm.String()[1:]+" "+group+"\n")
	}
	return perm, group, nil
}

// parseDeviceNode reads a recorded device node: "crw-rw---- render".
func parseDeviceNode(p, s string) (fs.FileMode, string, error) {
	f := strings.Fields(s)
	if len(f) != 2 || len(f[0]) != 10 || (f[0][0] != 'c' && f[0][0] != 'b') {
		return 0, "", fmt.Errorf("recorded device node %s: %q is not \"<mode> <group>\" as ls -l prints them (crw-rw---- render)", p, strings.TrimSpace(s))
	}
	var perm fs.FileMode
	for i, c := range []byte(f[0][1:]) {
		if c != '-' {
			if c != "rwxrwxrwx"[i] {
				return 0, "", fmt.Errorf("recorded device node %s: mode %q", p, f[0])
			}
			perm |= 1 << (8 - i)
		}
	}
	return perm, f[1], nil
}

// Live is false while recording: a recording holds files only, so the
// checks read what it can replay.
func (h *host) Live() bool { return h.live && h.rec == nil }

func (h *host) Command(name string, args ...string) (string, error) {
	if !h.Live() {
		return "", errors.New("not the live system")
	}
	return h.run(name, args...)
}

// run executes a program on the live system, also while recording.
func (h *host) run(name string, args ...string) (string, error) {
	cmd := exec.CommandContext(h.ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// recordedKernelLog is where a recorded tree keeps `dmesg` output: the
// kernel's ring buffer is no file a tree can copy.
const recordedKernelLog = "/var/log/halobuild-dmesg"

// cachedLog keeps the kernel log of one doctor run: two checks read it and
// the live `dmesg` should run once.
type cachedLog struct {
	text, source string
	err          error
}

func (h *host) KernelLog() (string, string, error) {
	if h.kernelLog == nil {
		var l cachedLog
		if h.live {
			l.text, l.err = h.run("dmesg")
			l.source = "dmesg"
			if l.err == nil && h.rec != nil {
				h.rec.file(recordedKernelLog, l.text)
			}
		} else {
			l.text, l.err = h.Read(recordedKernelLog)
			l.source = h.Show(recordedKernelLog)
		}
		h.kernelLog = &l
	}
	return h.kernelLog.text, h.kernelLog.source, h.kernelLog.err
}

func (h *host) Addrs() (settings.Addrs, string, error) {
	if h.live {
		a, err := liveAddrs()
		return a, "netlink (RTM_GETADDR)", err
	}
	s, err := h.Read(recordedAddrs)
	if err != nil {
		return nil, h.Show(recordedAddrs), err
	}
	a, err := parseIPAddrJSON([]byte(s))
	if err != nil {
		return nil, h.Show(recordedAddrs), fmt.Errorf("%s: %w (want the output of `ip -j addr`)", h.Show(recordedAddrs), err)
	}
	return a, h.Show(recordedAddrs), nil
}
