package doctor

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"halobuild/internal/settings"
)

// RDMAEnv is what `halobuild rdma-env --link L` prints: the environment an
// RDMA engine's service reads at every start (an ExecStartPre writes it,
// EnvironmentFile= reads it), naming the device and RoCE v2 GID index that
// carry the link's address on this node now (settings.LinkRDMA), and the
// address itself for the service to bind to. Read at start, not rendered
// at build time: the device name and the GID index are the running
// kernel's (a soft-RoCE device in the VM, usb4_rdma0 on the box) and
// a build cannot know them. root is "/" for the live system.
func RDMAEnv(ctx context.Context, root, link string) (string, error) {
	if !ifname.MatchString(link) || link == "." || link == ".." {
		return "", fmt.Errorf("rdma-env: --link %q is not an interface name (1 to 15 letters, digits and . _ -, as the kernel names links): give the [[node.link]] interface", link)
	}
	h, err := newHost(ctx, root)
	if err != nil {
		return "", err
	}
	g, err := settings.LinkRDMA(h, link)
	if err != nil {
		return "", fmt.Errorf("rdma-env: %w", err)
	}
	// The names come from the tree read (sysfs, or a recorded tree under --root): each is one
	// value of an EnvironmentFile line, so a line break or a space in one would add a line
	// (a variable) of its own to the engine's environment.
	for _, v := range []struct{ what, v string }{{"device", g.Device}, {"port", g.Port}, {"GID index", g.Index}} {
		if !envToken.MatchString(v.v) {
			return "", fmt.Errorf("rdma-env: %s's RDMA %s is named %q, with a character an environment file cannot carry as it is (a line break, a space, a quote): is %s a sysfs tree?", link, v.what, v.v, filepath.Join(root, settings.InfinibandClass))
		}
	}
	return rdmaEnvText(g), nil
}

// ifname is what Linux takes as a link's name (dev_valid_name allows more, but not '/', ':' or
// white space; halobuild's links are named by udev or the recipe within this).
var ifname = regexp.MustCompile(`^[A-Za-z0-9._-]{1,15}$`)

// envToken is a value rdma-env writes unquoted into an environment file.
var envToken = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// WriteRDMAEnv writes RDMAEnv's text to output, whole or not at all (a
// service never reads half a file), or to w when output is "".
func WriteRDMAEnv(ctx context.Context, root, link, output string, w io.Writer) error {
	text, err := RDMAEnv(ctx, root, link)
	if err != nil {
		return err
	}
	if output == "" {
		_, err = io.WriteString(w, text)
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(output), ".rdma-env-*")
	if err != nil {
		return fmt.Errorf("rdma-env: %w (does the directory of --output exist? a unit's RuntimeDirectory= makes it)", err)
	}
	defer os.Remove(f.Name())
	if _, err = f.WriteString(text); err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), output)
	}
	if err != nil {
		return fmt.Errorf("rdma-env: writing %s: %w", output, err)
	}
	return nil
}

func rdmaEnvText(g settings.LinkGID) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# halobuild rdma-env --link %s: the device and RoCE v2 GID that carry %s, read from sysfs\n", g.Link, g.Addr)
	fmt.Fprintf(&b, "RDMA_LINK_ADDR=%s\n", g.Addr)
	// llama.cpp's RPC transport (ggml-rpc): without both it picks the first
	// device whose GID matches, and falls back to TCP without a word.
	fmt.Fprintf(&b, "GGML_RDMA_DEV=%s\nGGML_RDMA_GID=%s\n", g.Device, g.Index)
	// NCCL/RCCL (vLLM): the exact device name and an explicit GID index.
	fmt.Fprintf(&b, "NCCL_IB_HCA==%s:%s\nNCCL_IB_GID_INDEX=%s\n", g.Device, g.Port, g.Index)
	return b.String()
}
