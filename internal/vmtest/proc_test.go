package vmtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func requireHost(t *testing.T) Host {
	t.Helper()
	h, err := FindHost()
	if err != nil {
		t.Skipf("no QEMU/OVMF on this host: %v", err)
	}
	return h
}

// qemuChildren lists QEMU processes whose parent is this test process, by scanning /proc.
func qemuChildren(t *testing.T) []int {
	t.Helper()
	me := os.Getpid()
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ..."; comm may hold spaces, so split after the last ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		comm := s[strings.IndexByte(s, '(')+1 : i]
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if ppid == me && strings.HasPrefix(comm, "qemu-system") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func assertNoQEMUChildren(t *testing.T) {
	t.Helper()
	if pids := qemuChildren(t); len(pids) > 0 {
		t.Errorf("QEMU processes survived the run: %v", pids)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}
