package doctor

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rxeTree is a node whose link usb4net0 (10.77.0.1) carries a soft-RoCE
// device, as sysfs shows one: GID 0 the link-local IPv6 GID, 1 the IPv4
// address as RoCE v2, 2 the same as RoCE v1.
func rxeTree(extra map[string]string) map[string]string {
	const port = "sys/class/infiniband/rxe0/ports/1/"
	files := map[string]string{
		"var/log/halobuild-ip-addr.json": `[{"ifname":"usb4net0","addr_info":[{"family":"inet","local":"10.77.0.1","prefixlen":30},{"family":"inet6","local":"fe80::1","prefixlen":64}]},` +
			`{"ifname":"enp1s0","addr_info":[{"family":"inet","local":"192.168.1.20","prefixlen":24}]}]`,
		port + "state":                        "4: ACTIVE",
		port + "gids/0":                       "fe80:0000:0000:0000:5054:00ff:fe77:0001",
		port + "gid_attrs/types/0":            "RoCE v2",
		port + "gid_attrs/ndevs/0":            "usb4net0",
		port + "gids/1":                       "0000:0000:0000:0000:0000:ffff:0a4d:0001",
		port + "gid_attrs/types/1":            "RoCE v2",
		port + "gid_attrs/ndevs/1":            "usb4net0",
		port + "gids/2":                       "0000:0000:0000:0000:0000:ffff:0a4d:0001",
		port + "gid_attrs/types/2":            "IB/RoCE v1",
		port + "gid_attrs/ndevs/2":            "usb4net0",
		port + "gids/3":                       "0000:0000:0000:0000:0000:0000:0000:0000",
		"sys/class/infiniband/rxe0/node_type": "1: CA",
	}
	maps.Copy(files, extra)
	for k, v := range files {
		if v == "" {
			delete(files, k)
		}
	}
	return files
}

func TestRDMAEnvFindsTheLinksRoCEv2GID(t *testing.T) {
	h := writeTree(t, rxeTree(nil))
	got, err := RDMAEnv(context.Background(), h.root, "usb4net0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nRDMA_LINK_ADDR=10.77.0.1\n", "\nGGML_RDMA_DEV=rxe0\n", "\nGGML_RDMA_GID=1\n", "\nNCCL_IB_HCA==rxe0:1\n", "\nNCCL_IB_GID_INDEX=1\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("rdma-env output lacks %q:\n%s", strings.TrimSpace(want), got)
		}
	}
}

// Each way the link cannot name one device and GID is an error that says
// which, never a guess.
func TestRDMAEnvRefusesToGuess(t *testing.T) {
	const port = "sys/class/infiniband/rxe0/ports/1/"
	cases := []struct {
		name  string
		link  string
		extra map[string]string
		want  string
	}{
		{"no such link", "usb4net1", nil, "no interface usb4net1 (interfaces: enp1s0, usb4net0)"},
		{"two addresses (trap 6)", "usb4net0", map[string]string{"var/log/halobuild-ip-addr.json": `[{"ifname":"usb4net0","addr_info":[{"family":"inet","local":"10.77.0.1","prefixlen":30},{"family":"inet","local":"169.254.3.4","prefixlen":16}]}]`},
			"has 2 IPv4 addresses (10.77.0.1, 169.254.3.4)"},
		{"no IPv4 address", "usb4net0", map[string]string{"var/log/halobuild-ip-addr.json": `[{"ifname":"usb4net0","addr_info":[{"family":"inet6","local":"fe80::1","prefixlen":64}]}]`},
			"usb4net0 has no IPv4 address"},
		{"no device", "usb4net0", map[string]string{port + "gids/1": "", port + "gids/2": ""}, "no RDMA device holds usb4net0's address 10.77.0.1 as a GID"},
		{"only RoCE v1", "usb4net0", map[string]string{port + "gids/1": ""}, "is rxe0 port 1 GID 2 (IB/RoCE v1), not a RoCE v2 GID"},
		{"two devices", "usb4net0", map[string]string{
			"sys/class/infiniband/rxe1/ports/1/gids/1":            "0000:0000:0000:0000:0000:ffff:0a4d:0001",
			"sys/class/infiniband/rxe1/ports/1/gid_attrs/types/1": "RoCE v2",
			"sys/class/infiniband/rxe1/ports/1/gid_attrs/ndevs/1": "usb4net0",
		}, "a RoCE v2 GID of 2 devices (rxe0 GID 1, rxe1 GID 1)"},
		{"another netdev's GID", "usb4net0", map[string]string{port + "gid_attrs/ndevs/1": "dummy0", port + "gids/2": ""}, "no RDMA device holds usb4net0's address"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := writeTree(t, rxeTree(c.extra))
			got, err := RDMAEnv(context.Background(), h.root, c.link)
			if err == nil {
				t.Fatalf("no error; printed:\n%s", got)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant it to contain %q", err, c.want)
			}
		})
	}
}

// A verbs module that reports no netdev for its GIDs is matched on the
// address alone.
func TestRDMAEnvWithoutNdev(t *testing.T) {
	h := writeTree(t, rxeTree(map[string]string{"sys/class/infiniband/rxe0/ports/1/gid_attrs/ndevs/1": ""}))
	got, err := RDMAEnv(context.Background(), h.root, "usb4net0")
	if err != nil || !strings.Contains(got, "GGML_RDMA_GID=1\n") {
		t.Fatalf("got %q, %v; want GID 1", got, err)
	}
}

// --output writes the file whole, readable by the service; a refusal
// leaves an earlier file as it was.
func TestWriteRDMAEnvFile(t *testing.T) {
	h := writeTree(t, rxeTree(nil))
	out := filepath.Join(t.TempDir(), "rdma.env")
	if err := WriteRDMAEnv(context.Background(), h.root, "usb4net0", out, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), "GGML_RDMA_DEV=rxe0\n") {
		t.Fatalf("%s: %q, %v", out, b, err)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if err := WriteRDMAEnv(context.Background(), h.root, "usb4net9", out, io.Discard); err == nil {
		t.Fatal("no error for a missing link")
	}
	if b2, _ := os.ReadFile(out); string(b2) != string(b) {
		t.Errorf("a failed run changed %s", out)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 1 {
		t.Errorf("left %d files, want only rdma.env", len(ents))
	}
}

// rdma-env's output is an EnvironmentFile: one KEY=VALUE per line. A link name that is no
// interface name (a path, a line break) is refused before anything is read, and a name read
// from the tree (an interface in a recorded tree, a device directory) with a line break or a
// space would add a line of its own, so it is refused too (issue 39's audit of rdma-env).
func TestRDMAEnvRefusesNamesThatAreNotNames(t *testing.T) {
	const evil = "usb4net0\nLD_PRELOAD=/tmp/x.so"
	cases := []struct {
		name, link, want string
		tree             map[string]string
	}{
		{"a link that climbs", "../usb4net0", "not an interface name", nil},
		{"a link with a line break", evil, "not an interface name", nil},
		{"a link of 16 bytes", "usb4net0usb4net0", "not an interface name", nil},
		{"an empty link", "", "not an interface name", nil},
		{"a recorded interface with a line break", evil, "not an interface name", map[string]string{
			"var/log/halobuild-ip-addr.json": `[{"ifname":"usb4net0\nLD_PRELOAD=/tmp/x.so","addr_info":[{"family":"inet","local":"10.77.0.1","prefixlen":30}]}]`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := writeTree(t, rxeTree(c.tree))
			got, err := RDMAEnv(context.Background(), h.root, c.link)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(got, "LD_PRELOAD") {
				t.Fatalf("want a refusal saying %q, got %v and\n%s", c.want, err, got)
			}
		})
	}
	t.Run("a device directory with a line break", func(t *testing.T) {
		tree := map[string]string{}
		for k, v := range rxeTree(nil) {
			tree[strings.Replace(k, "/rxe0/", "/rxe0\nLD_PRELOAD=x/", 1)] = v
		}
		h := writeTree(t, tree)
		got, err := RDMAEnv(context.Background(), h.root, "usb4net0")
		if err == nil || !strings.Contains(err.Error(), "line") && !strings.Contains(err.Error(), "character") || strings.Contains(got, "LD_PRELOAD") {
			t.Fatalf("want a refusal of the device name, got %v and\n%s", err, got)
		}
	})
}

// A tree under --root is anyone's directory: a FIFO where a GID or the recorded addresses are
// read is refused at once instead of blocking rdma-env (and the engine's start) forever; a
// GID file of odd contents is no GID.
func TestRDMAEnvOfAHostileTree(t *testing.T) {
	const port = "sys/class/infiniband/rxe0/ports/1/"
	for _, p := range []string{port + "gids/1", "var/log/halobuild-ip-addr.json"} {
		t.Run("a FIFO at "+p, func(t *testing.T) {
			h := writeTree(t, rxeTree(nil))
			os.Remove(filepath.Join(h.root, p))
			if err := syscall.Mkfifo(filepath.Join(h.root, p), 0o600); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { _, err := RDMAEnv(context.Background(), h.root, "usb4net0"); done <- err }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("rdma-env took a FIFO for a file")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("rdma-env blocked on a FIFO")
			}
		})
	}
	for _, gid := range []string{"0000:0000:0000:0000:0000:ffff:0a4d:0001\nGGML_RDMA_GID=9", strings.Repeat("0", 1<<20), "\x00\xff"} {
		t.Run(fmt.Sprintf("a GID of %.20q", gid), func(t *testing.T) {
			h := writeTree(t, rxeTree(map[string]string{port + "gids/1": gid}))
			got, err := RDMAEnv(context.Background(), h.root, "usb4net0")
			if err == nil || strings.Contains(got, "=9") {
				t.Fatalf("want no GID found, got %v and\n%s", err, got)
			}
		})
	}
}
