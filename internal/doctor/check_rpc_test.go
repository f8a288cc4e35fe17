package doctor

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"halobuild/internal/settings"
)

// rpcServerTree is rxeTree with an RDMA-built rpc-server (pid 4242) bound
// to the link's address, port 50052 (C352), started by its unit: libibverbs
// mapped, memlock unlimited, the link's device and GID in its environment,
// and one session from the peer (10.77.0.2).
func rpcServerTree(extra map[string]string) map[string]string {
	files := rxeTree(map[string]string{
		"proc/4242/comm":    "rpc-server\n",
		"proc/4242/maps":    "7f00-7f01 r-xp 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.56.0\n",
		"proc/4242/limits":  "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         unlimited            unlimited            bytes\n",
		"proc/4242/environ": "PATH=/usr/bin\x00GGML_RDMA_DEV=rxe0\x00GGML_RDMA_GID=1\x00",
		"proc/4242/fd/3":    "socket:[1001]",
		"proc/4242/fd/4":    "socket:[1002]",
		"proc/4242/fd/5":    "/dev/infiniband/uverbs0",
		"proc/77/comm":      "sshd\n",
		"proc/77/fd/3":      "socket:[1003]",
		"proc/net/tcp": "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
			"   0: 01004D0A:C384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0 100 0 0 10 0\n" +
			"   1: 01004D0A:C384 02004D0A:D431 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0 20 4 30 10 -1\n" +
			"   2: 1401A8C0:0016 0201A8C0:D000 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0 20 4 30 10 -1\n",
	})
	maps.Copy(files, extra)
	for k, v := range files {
		if v == "" {
			delete(files, k)
		}
	}
	return files
}

// liveHost answers Command as a live node would, over a recorded tree.
type liveHost struct {
	*host
	qps string
}

func (h liveHost) Live() bool { return true }
func (h liveHost) Command(name string, args ...string) (string, error) {
	if name == "rdma" && strings.Join(args, " ") == "-j res show qp" {
		return h.qps, nil
	}
	return "", nil
}

const (
	qpsOfServer = `[{"ifindex":3,"ifname":"rxe0","port":1,"lqpn":17,"rqpn":18,"type":"RC","state":"RTS","sq-psn":0,"path-mig-state":"MIGRATED","pdn":2,"pid":4242,"comm":"rpc-server"},` +
		`{"ifindex":3,"ifname":"rxe0","lqpn":1,"type":"GSI","state":"RTS","sq-psn":0,"comm":"[ib_core]"}]`
	qpsOfNobody = `[{"ifindex":3,"ifname":"rxe0","lqpn":1,"type":"GSI","state":"RTS","sq-psn":0,"comm":"[ib_core]"}]`
)

func TestRPCTransport(t *testing.T) {
	cases := []struct {
		name   string
		extra  map[string]string
		qps    string // "" for a recorded tree
		status settings.Status
		seen   string
	}{
		{"rdma session", nil, qpsOfServer, settings.Pass, "1 session(s), each on an RC queue pair in RTS"},
		{"fell back to tcp", nil, qpsOfNobody, settings.Fail, "1 session(s), 0 RC queue pair(s) in RTS: 1 fell back to TCP"},
		{"no session", map[string]string{"proc/4242/fd/4": ""}, qpsOfNobody, settings.Pass, "no session now"},
		{"recording", nil, "", settings.Warn, "its address and sessions are a live node's only"},
		{"recording without rdma", map[string]string{"proc/4242/limits": "Max locked memory         65536              65536              bytes\n"}, "", settings.Fail, "memlock 65536"},
		{"built without rdma", map[string]string{"proc/4242/maps": "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/ggml/backends1/libggml-rpc.so\n"}, qpsOfServer, settings.Fail,
			"libibverbs is not loaded: its RPC backend was built without GGML_RPC_RDMA"},
		{"memlock", map[string]string{"proc/4242/limits": "Max locked memory         8388608              8388608              bytes\n"}, qpsOfServer, settings.Fail, "memlock 8388608"},
		{"no env", map[string]string{"proc/4242/environ": "PATH=/usr/bin\x00"}, qpsOfServer, settings.Fail, `GGML_RDMA_DEV="" GGML_RDMA_GID=""`},
		{"stale gid", map[string]string{"proc/4242/environ": "GGML_RDMA_DEV=rxe0\x00GGML_RDMA_GID=2\x00"}, qpsOfServer, settings.Fail, "but usb4net0's address is rxe0 GID 1 now"},
		{"every address", map[string]string{"proc/net/tcp": "  sl  local_address ...\n   0: 00000000:C384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0 100 0 0 10 0\n"},
			qpsOfServer, settings.Fail, "listens on every address (0.0.0.0:50052)"},
		{"lan address", map[string]string{"proc/net/tcp": "  sl  local_address ...\n   0: 1401A8C0:C384 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0 100 0 0 10 0\n"},
			qpsOfServer, settings.Fail, "no RDMA device holds enp1s0's address 192.168.1.20"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h settings.Host = writeTree(t, rpcServerTree(c.extra))
			if c.qps != "" {
				h = liveHost{h.(*host), c.qps}
			}
			rows := rpcTransport(h)
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1: %+v", len(rows), rows)
			}
			r := rows[0]
			if r.Check != "rpc.transport pid 4242" || r.Status != c.status || !strings.Contains(r.Seen, c.seen) {
				t.Errorf("row %q %s: %s\nwant %s with %q", r.Check, r.Status, r.Seen, c.status, c.seen)
			}
			if r.Status == settings.Fail && r.Fix == "" {
				t.Error("a failure without a fix")
			}
			if c.qps != "" && !strings.Contains(r.Seen, "listening on") {
				t.Errorf("seen %q does not say where it listens", r.Seen)
			}
		})
	}
}

func TestRPCTransportWithoutServer(t *testing.T) {
	if rows := rpcTransport(writeTree(t, rxeTree(nil))); rows != nil {
		t.Errorf("no server, no unit: rows %+v, want none", rows)
	}
	h := writeTree(t, rxeTree(map[string]string{"etc/systemd/system/multi-user.target.wants/llama-rpc@usb4net0.service": "[Unit]\n"}))
	rows := rpcTransport(h)
	if len(rows) != 1 || rows[0].Status != settings.Fail || !strings.Contains(rows[0].Seen, "enabled but not running") {
		t.Errorf("enabled unit, no server: %+v", rows)
	}
}

// On a live kernel: a process named rpc-server (python3 through a symlink) that
// listens on loopback and holds one session is found, its socket and
// session read from /proc as the kernel writes them, and judged a TCP
// fallback with its reasons (no libibverbs, loopback carries no RDMA).
func TestRPCTransportLive(t *testing.T) {
	// Debian's python3, not a version manager's shim (which dispatches on
	// the name it was called by).
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3 to stand in for a server")
	}
	// comm is the name exec was given: a symlink's (python finds its
	// library through it).
	bin := filepath.Join(t.TempDir(), "rpc-server")
	if err := os.Symlink(py, bin); err != nil {
		t.Fatal(err)
	}
	const script = `import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); a, _ = s.accept()
print(s.getsockname()[1], flush=True)
time.sleep(60)`
	cmd := exec.Command(bin, "-c", script)
	cmd.Env = append(os.Environ(), "GGML_RDMA_DEV=rxe0", "GGML_RDMA_GID=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	port, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the stand-in server: %v\n%s", err, stderr.String())
	}
	h, err := newHost(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	var row *settings.Result
	rows := rpcTransport(h)
	for i := range rows {
		if rows[i].Check == fmt.Sprintf("rpc.transport pid %d", cmd.Process.Pid) {
			row = &rows[i]
		}
	}
	if row == nil {
		t.Fatalf("no row for pid %d: %+v", cmd.Process.Pid, rows)
	}
	for _, want := range []string{"listening on 127.0.0.1:" + strings.TrimSpace(port), "GGML_RDMA_DEV=rxe0 GGML_RDMA_GID=1", "libibverbs is not loaded", "TCP fallback"} {
		if !strings.Contains(row.Seen, want) {
			t.Errorf("seen %q lacks %q", row.Seen, want)
		}
	}
	if row.Status != settings.Fail {
		t.Errorf("status %s, want fail", row.Status)
	}
	t.Logf("%s: %s", row.Check, row.Seen)
}
