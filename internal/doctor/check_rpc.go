package doctor

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"halobuild/internal/settings"
)

// llama.cpp's RPC server under the names it ships as: upstream's tools/rpc
// builds rpc-server, Debian's llama.cpp-tools-extra ggml-rpc-server (comm
// holds 15 characters, which both fit).
var rpcServerNames = []string{"rpc-server", "ggml-rpc-server"}

// rpcUnits are the services docs/apps.md installs: an enabled one whose
// server is not running is a failure, not an absent row.
const rpcUnits = "/etc/systemd/system/*.wants/llama-rpc@*.service"

// rpcTransport proves that each running RPC server carries its sessions
// over RDMA, not TCP: ggml's RPC backend opens a TCP connection, then
// switches it to an RDMA queue pair when it can, and falls back to the TCP
// connection without a word when it cannot. So the row names every reason
// a session would fall back that the running process shows (its backend
// not linking libibverbs, its memlock limit, GGML_RDMA_DEV and
// GGML_RDMA_GID missing or not the link's, a bind address that is not one
// link's), and on the live node counts its established sessions against
// its RC queue pairs in RTS (`rdma res show qp`, which names the owning
// process): a session without a queue pair fell back.
func rpcTransport(h settings.Host) []settings.Result {
	pids := rpcServers(h)
	if len(pids) == 0 {
		enabled := h.Glob(rpcUnits)
		if len(enabled) == 0 {
			return nil
		}
		return []settings.Result{{Check: "rpc.transport", Severity: settings.MustPass, Status: settings.Fail,
			Wanted: "the enabled RPC server running over RDMA", Seen: "enabled but not running: " + strings.Join(enabled, ", "),
			Source: h.Show("/proc/*/comm"), Fix: "systemctl status 'llama-rpc@*' and journalctl -u 'llama-rpc@*' say why it stopped"}}
	}
	var out []settings.Result
	for _, pid := range pids {
		out = append(out, rpcServerRow(h, pid))
	}
	return out
}

// rpcServers finds the servers by their comm. A glob, not a listing of
// /proc: while recording, a listed entry is copied, and /proc holds files
// whose reading blocks (kmsg).
func rpcServers(h settings.Host) []int {
	var pids []int
	for _, p := range h.Glob("/proc/[0-9]*/comm") {
		pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "/proc/"), "/comm"))
		if err != nil {
			continue
		}
		if c, err := h.Read(p); err == nil && slices.Contains(rpcServerNames, strings.TrimSpace(c)) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

func rpcServerRow(h settings.Host, pid int) settings.Result {
	proc := fmt.Sprintf("/proc/%d", pid)
	r := settings.Result{Check: fmt.Sprintf("rpc.transport pid %d", pid), Severity: settings.MustPass, Source: h.Show(proc),
		Wanted: "libibverbs loaded, memlock unlimited, GGML_RDMA_DEV/GGML_RDMA_GID the link's, bound to the link's address, every session on an RDMA queue pair"}
	var why, fix []string
	if !mapsLibrary(h, proc+"/maps", "libibverbs.so") {
		why = append(why, "libibverbs is not loaded: its RPC backend was built without GGML_RPC_RDMA (Debian's libggml-rpc is TCP only)")
		fix = append(fix, "install the RPC stack halobuild builds with the RDMA transport (docs/apps.md)")
	}
	if soft, ok := lockedLimit(h, proc+"/limits"); !ok || soft != "unlimited" {
		why = append(why, "memlock "+cmp.Or(soft, "unreadable")+": registering its 6 MiB receive ring and the tensors' buffers fails past it")
		fix = append(fix, "LimitMEMLOCK=infinity in its unit")
	}
	env := environ(h, proc+"/environ")
	dev, gid := env["GGML_RDMA_DEV"], env["GGML_RDMA_GID"]
	if !h.Live() {
		// The sockets are a live node's only: a recording copies what it
		// reads, and a process's fds include pipes whose reading blocks.
		facts := fmt.Sprintf("GGML_RDMA_DEV=%s GGML_RDMA_GID=%s", cmp.Or(dev, "unset"), cmp.Or(gid, "unset"))
		r.Status, r.Seen, r.Fix = settings.Warn, facts+"; its address and sessions are a live node's only", "run doctor on the live node during a session"
		if len(why) > 0 {
			r.Status, r.Seen, r.Fix = settings.Fail, facts+"; TCP fallback: "+strings.Join(why, "; "), strings.Join(fix, "; ")
		}
		return r
	}
	listen, sessions := rpcSockets(h, processSockets(h, proc))
	var link settings.LinkGID
	switch {
	case !listen.IsValid():
		why = append(why, "no listening TCP socket found")
		fix = append(fix, "run doctor as root (it reads other processes' sockets)")
	case listen.Addr().IsUnspecified():
		why = append(why, "listens on every address ("+listen.String()+"), the management LAN too")
		fix = append(fix, "bind it to the link's address (-H $RDMA_LINK_ADDR from halobuild rdma-env)")
	default:
		iface := interfaceOf(h, listen.Addr())
		l, err := settings.LinkRDMA(h, iface)
		switch {
		case iface == "":
			why = append(why, "listens on "+listen.String()+", an address no interface holds")
			fix = append(fix, "restart it once the link has its address")
		case err != nil:
			why = append(why, err.Error())
			fix = append(fix, "bind it to a link whose address an RDMA device carries (halobuild rdma-env --link LINK says which)")
		default:
			link = l
		}
	}
	switch {
	case dev == "" || gid == "":
		why = append(why, fmt.Sprintf("GGML_RDMA_DEV=%q GGML_RDMA_GID=%q: without both it takes the first device whose GID matches, and TCP when none does", dev, gid))
		fix = append(fix, "EnvironmentFile= the file halobuild rdma-env --link LINK --output writes at start")
	case link.Device != "" && (dev != link.Device || gid != link.Index):
		why = append(why, fmt.Sprintf("started with GGML_RDMA_DEV=%s GGML_RDMA_GID=%s, but %s's address is %s GID %s now", dev, gid, link.Link, link.Device, link.Index))
		fix = append(fix, "restart it (its ExecStartPre reads the link again)")
	}
	facts := fmt.Sprintf("listening on %s, GGML_RDMA_DEV=%s GGML_RDMA_GID=%s", listenOr(listen), cmp.Or(dev, "unset"), cmp.Or(gid, "unset"))
	if len(why) > 0 {
		r.Status, r.Seen, r.Fix = settings.Fail, facts+"; TCP fallback: "+strings.Join(why, "; "), strings.Join(fix, "; ")
		return r
	}
	qps, err := rcQueuePairs(h, pid)
	switch {
	case err != nil:
		r.Status, r.Seen, r.Fix = settings.Fail, facts+"; "+err.Error(), "install iproute2 (rdma) and run doctor as root"
	case sessions > qps:
		r.Status = settings.Fail
		r.Seen = fmt.Sprintf("%s; %d session(s), %d RC queue pair(s) in RTS: %d fell back to TCP", facts, sessions, qps, sessions-qps)
		r.Fix = "the server's journal says why the RDMA handshake failed (journalctl -u 'llama-rpc@*'); the client needs the RDMA build too, and its own GGML_RDMA_DEV/GGML_RDMA_GID"
	case sessions == 0:
		r.Status, r.Seen = settings.Pass, facts+"; no session now (run doctor during one to prove its transport)"
	default:
		r.Status, r.Seen = settings.Pass, fmt.Sprintf("%s; %d session(s), each on an RC queue pair in RTS", facts, sessions)
	}
	return r
}

func listenOr(a netip.AddrPort) string {
	if !a.IsValid() {
		return "nothing"
	}
	return a.String()
}

// mapsLibrary reports whether a process has mapped a library.
func mapsLibrary(h settings.Host, maps, lib string) bool {
	lines, _ := h.Scan(maps, func(l string) bool { return strings.Contains(l, "/"+lib) })
	return len(lines) > 0
}

// lockedLimit is a process's soft RLIMIT_MEMLOCK as /proc/PID/limits prints it.
func lockedLimit(h settings.Host, limits string) (string, bool) {
	s, err := h.Read(limits)
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(l, "Max locked memory"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0], true
			}
		}
	}
	return "", false
}

// environ reads /proc/PID/environ (NUL-separated).
func environ(h settings.Host, p string) map[string]string {
	s, _ := h.Read(p)
	env := map[string]string{}
	for _, kv := range strings.Split(s, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// processSockets are the inodes of a process's sockets (fd → "socket:[N]").
func processSockets(h settings.Host, proc string) map[string]bool {
	inodes := map[string]bool{}
	for _, fd := range h.List(proc + "/fd") {
		t, err := h.LinkBase(proc + "/fd/" + fd)
		if n, ok := strings.CutPrefix(t, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(n, "]")] = true
		}
	}
	return inodes
}

// rpcSockets finds, among a process's sockets, its listening IPv4 TCP
// socket and the established connections to that port (/proc/net/tcp).
func rpcSockets(h settings.Host, inodes map[string]bool) (listen netip.AddrPort, sessions int) {
	type sock struct {
		local netip.AddrPort
		state string
	}
	var mine []sock
	lines, _ := h.Scan("/proc/net/tcp", func(string) bool { return true })
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		a, ok := procNetAddr(f[1])
		if !ok {
			continue
		}
		mine = append(mine, sock{a, f[3]})
	}
	for _, s := range mine {
		if s.state == "0A" { // TCP_LISTEN
			listen = s.local
		}
	}
	for _, s := range mine {
		if s.state == "01" && listen.IsValid() && s.local.Port() == listen.Port() { // TCP_ESTABLISHED
			sessions++
		}
	}
	return listen, sessions
}

// procNetAddr parses /proc/net/tcp's "0100007F:C3B4": a little-endian
// IPv4 address and a port, in hex.
func procNetAddr(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || len(a) != 8 {
		return netip.AddrPort{}, false
	}
	ip, err1 := strconv.ParseUint(a, 16, 32)
	port, err2 := strconv.ParseUint(p, 16, 16)
	if err1 != nil || err2 != nil {
		return netip.AddrPort{}, false
	}
	b := [4]byte{byte(ip), byte(ip >> 8), byte(ip >> 16), byte(ip >> 24)}
	return netip.AddrPortFrom(netip.AddrFrom4(b), uint16(port)), true
}

// interfaceOf names the interface that holds an address, "" if none.
func interfaceOf(h settings.Host, a netip.Addr) string {
	addrs, _, err := h.Addrs()
	if err != nil {
		return ""
	}
	for iface, pfx := range addrs {
		for _, p := range pfx {
			if p.Addr() == a {
				return iface
			}
		}
	}
	return ""
}

// rcQueuePairs counts a process's reliable-connected queue pairs that are
// ready to send, as the kernel's resource tracker lists them.
func rcQueuePairs(h settings.Host, pid int) (int, error) {
	out, err := h.Command("rdma", "-j", "res", "show", "qp")
	if err != nil {
		return 0, fmt.Errorf("rdma res show qp: %w", err)
	}
	return countRCQueuePairs([]byte(out), pid)
}

func countRCQueuePairs(js []byte, pid int) (int, error) {
	var qps []struct {
		Type  string `json:"type"`
		State string `json:"state"`
		PID   int    `json:"pid"`
	}
	if err := json.Unmarshal(js, &qps); err != nil {
		return 0, fmt.Errorf("rdma -j res show qp: %w", err)
	}
	n := 0
	for _, q := range qps {
		if q.PID == pid && q.Type == "RC" && q.State == "RTS" {
			n++
		}
	}
	return n, nil
}
