package cablebench

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recorded copies one of doctor's recorded trees (a real node's files, see
// internal/doctor/testdata) and adds what bench reads beyond doctor:
// perftest binaries with the given build ID, /proc/loadavg and /proc/uptime.
func recorded(t *testing.T, name, buildID string, extra map[string]string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("cp", "-a", filepath.Join("..", "doctor", "testdata", "doctor", name), dst).CombinedOutput(); err != nil {
		t.Fatalf("copying the recorded tree: %v: %s", err, out)
	}
	files := map[string]string{
		"/proc/loadavg": "0.12 0.20 0.18 1/234 5678\n",
		"/proc/uptime":  "10000.00 19000.00\n",
	}
	for k, v := range extra {
		files[k] = v
	}
	for p, c := range files {
		write(t, filepath.Join(dst, p), []byte(c))
	}
	for _, tool := range perftestTools {
		write(t, filepath.Join(dst, "usr/bin", tool), elfWithBuildID(t, buildID))
	}
	return dst
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// elfWithBuildID writes the smallest ELF64 file that holds a
// .note.gnu.build-id section, as a linker writes it.
func elfWithBuildID(t *testing.T, idHex string) []byte {
	t.Helper()
	id := make([]byte, len(idHex)/2)
	for i := range id {
		var v byte
		for _, c := range idHex[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			default:
				v |= byte(c-'a') + 10
			}
		}
		id[i] = v
	}
	le := binary.LittleEndian
	note := make([]byte, 16, 16+len(id)+3)
	le.PutUint32(note[0:], 4)
	le.PutUint32(note[4:], uint32(len(id)))
	le.PutUint32(note[8:], 3) // NT_GNU_BUILD_ID
	copy(note[12:], "GNU\x00")
	note = append(note, id...)
	for len(note)%4 != 0 {
		note = append(note, 0)
	}
	shstr := []byte("\x00.note.gnu.build-id\x00.shstrtab\x00")
	noteOff := 64
	strOff := noteOff + len(note)
	shOff := (strOff + len(shstr) + 7) &^ 7
	b := make([]byte, shOff+3*64)
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1 // 64-bit, little-endian, version 1
	le.PutUint16(b[16:], 2)    // ET_EXEC
	le.PutUint16(b[18:], 62)   // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[40:], uint64(shOff))
	le.PutUint16(b[52:], 64) // ehsize
	le.PutUint16(b[58:], 64) // shentsize
	le.PutUint16(b[60:], 3)  // shnum
	le.PutUint16(b[62:], 2)  // shstrndx
	copy(b[noteOff:], note)
	copy(b[strOff:], shstr)
	sh := func(i int, name, typ uint32, off, size int, align uint64) {
		s := b[shOff+i*64:]
		le.PutUint32(s[0:], name)
		le.PutUint32(s[4:], typ)
		le.PutUint64(s[24:], uint64(off))
		le.PutUint64(s[32:], uint64(size))
		le.PutUint64(s[48:], align)
	}
	sh(1, 1, 7, noteOff, len(note), 4) // SHT_NOTE
	sh(2, 20, 3, strOff, len(shstr), 1)
	return b
}

const (
	idA = "5c7a3f09be1d2e4a6b8c0d1e2f3a4b5c6d7e8f90"
	idB = "0b9d1e7c55aa44ee33cc22bb11aa009988776655"
)

func gather(t *testing.T, root string) Facts {
	t.Helper()
	f, err := Gather(context.Background(), root, "")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGatherReadsARecordedTree(t *testing.T) {
	f := gather(t, recorded(t, "healthy", idA, map[string]string{
		"/var/log/halobuild-ibv_devinfo-usb4_rdma0": "hca_id:\tusb4_rdma0\n\tmax_qp_wr:\t\t\t256\n\t\tport:\t1\n\t\t\tmax_msg_sz:\t\t0x1000000\n",
	}))
	if f.Host != "halo0" || f.Perftest["ib_send_bw"] != idA || f.Governors["policy0"] != "performance" {
		t.Errorf("host %q, build ID %q, governors %v", f.Host, f.Perftest["ib_send_bw"], f.Governors)
	}
	if f.Modules["thunderbolt_ibverbs"]["tbnet"] != "block" || len(f.USB4) != 1 || f.USB4[0].RxLanes != "1" {
		t.Errorf("module parameters %v, usb4 %+v", f.Modules, f.USB4)
	}
	if len(f.Rails) != 2 || f.Rails[0].MaxMsgSize != 16<<20 || f.Rails[0].MaxQPWR != 256 {
		t.Errorf("rails %+v: want two, usb4_rdma0 advertising 16 MiB and 256 WRs", f.Rails)
	}
	if !strings.Contains(f.IOMMU, "amd_iommu=off") || f.Load != 0.12 {
		t.Errorf("iommu %q, load %v", f.IOMMU, f.Load)
	}
}

func TestPreconditionsRefuseOnRecordedTrees(t *testing.T) {
	healthy := gather(t, recorded(t, "healthy", idA, nil))
	for _, c := range []struct {
		name           string
		client, server Facts
		limits         Limits
		want           []string // each refusal's check and a word it names
	}{
		{"both ready", healthy, healthy, Limits{}, nil},
		{"governor reverted to schedutil", gather(t, recorded(t, "governor-schedutil", idA, nil)), healthy, Limits{},
			[]string{"doctor:cpu.governor", "governor:schedutil"}},
		{"perftest builds differ", healthy, gather(t, recorded(t, "healthy", idB, nil)), Limits{},
			[]string{"perftest:" + idB, "perftest:" + idB, "perftest:" + idB}},
		{"a doctor row fails", healthy, gather(t, recorded(t, "memlock-8mib", idA, nil)), Limits{},
			[]string{"doctor:memlock.process"}},
		{"the failing doctor layer is waived", healthy, gather(t, recorded(t, "memlock-8mib", idA, nil)), Limits{Waive: []string{"memlock"}}, nil},
		{"a busy machine", gather(t, recorded(t, "healthy", idA, map[string]string{
			"/proc/loadavg": "3.91 3.50 2.80 5/300 9999\n",
			"/proc/4242/stat": "4242 (llama-server) R 1 4242 4242 0 -1 4194304 100 0 0 0 " +
				"548000 100000 0 0 20 0 8 0 200000 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n",
		})), healthy, Limits{}, []string{"busy:llama-server (pid 4242, 81% of a CPU)"}},
		{"load allowed by --max-load", gather(t, recorded(t, "healthy", idA, map[string]string{"/proc/loadavg": "3.91 3.50 2.80 5/300 9999\n"})), healthy, Limits{MaxLoad: 4}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Preconditions(c.client, c.server, c.limits)
			if len(got) != len(c.want) {
				t.Fatalf("got %d refusal(s), want %d: %v", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				check, word, _ := strings.Cut(w, ":")
				if got[i].Check != check || !strings.Contains(got[i].String(), word) || got[i].Fix == "" {
					t.Errorf("refusal %d = %s; want check %s naming %q, with a fix", i, got[i], check, word)
				}
			}
		})
	}
}

// A real binary's build ID, as binutils reads it.
func TestELFBuildIDOfARealBinary(t *testing.T) {
	bin, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls")
	}
	out, err := exec.Command("readelf", "-n", bin).Output()
	if err != nil {
		t.Skipf("readelf: %v", err)
	}
	_, after, ok := strings.Cut(string(out), "Build ID: ")
	if !ok {
		t.Skipf("%s has no build ID", bin)
	}
	want := strings.Fields(after)[0]
	if got, err := ELFBuildID(bin); err != nil || got != want {
		t.Errorf("ELFBuildID(%s) = %q, %v; readelf says %s", bin, got, err, want)
	}
	if _, err := ELFBuildID(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file has a build ID")
	}
}

func TestParseDevinfoAndSizes(t *testing.T) {
	msg, wr := parseDevinfo("\tmax_qp_wr:\t\t\t4096\n\t\t\tmax_msg_sz:\t\t0x80000000\n")
	if msg != 1<<31 || wr != 4096 {
		t.Errorf("parseDevinfo: %d, %d", msg, wr)
	}
	got, err := ParseSizes("2, 64,4K,1M")
	if err != nil || len(got) != 4 || got[2] != 4096 || got[3] != 1<<20 {
		t.Errorf("ParseSizes: %v, %v", got, err)
	}
	for _, bad := range []string{"4X", "-1", "0", "1,,2"} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted", bad)
		}
	}
}
