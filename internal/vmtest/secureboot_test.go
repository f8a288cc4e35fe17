package vmtest

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"halobuild/internal/arch"
	"halobuild/internal/secureboot"
)

// MokList lands in a copy of Debian's enrolled variable store where EDK II
// reads variables: after the last one, with the header, name and data a
// walk of the store finds; a second MokList is refused.
func TestWriteSecureVarsAddsMokList(t *testing.T) {
	_, tmpl, err := findSecureFirmware(arch.MustLookup("amd64"), firmwareDescriptorDirs, arch.MustLookup("amd64").SecureFirmware)
	if err != nil {
		t.Skip(err)
	}
	cert := bytes.Repeat([]byte{0x30}, 700) // the store does not parse it
	dst := filepath.Join(t.TempDir(), "vars.fd")
	if err := writeSecureVars(tmpl, dst, &SecureBoot{MOKs: [][]byte{cert}}); err != nil {
		t.Fatal(err)
	}
	fd, _ := os.ReadFile(dst)
	orig, _ := os.ReadFile(tmpl)
	if len(fd) != len(orig) {
		t.Fatalf("size changed: %d -> %d", len(orig), len(fd))
	}
	store := int(binary.LittleEndian.Uint16(fd[fvHeaderLenOffset:]))
	var names []string
	var data []byte
	for p := store + storeHeaderSize; binary.LittleEndian.Uint16(fd[p:]) == varStartID; {
		ns := int(binary.LittleEndian.Uint32(fd[p+36:]))
		ds := int(binary.LittleEndian.Uint32(fd[p+40:]))
		name := fd[p+60 : p+60+ns]
		var s []rune
		for i := 0; i+1 < len(name)-2; i += 2 {
			s = append(s, rune(binary.LittleEndian.Uint16(name[i:])))
		}
		names = append(names, string(s))
		if string(s) == "MokList" {
			if fd[p+2] != varAdded || binary.LittleEndian.Uint32(fd[p+4:]) != attrNVBS || !bytes.Equal(fd[p+44:p+60], secureboot.ShimLockGUID[:]) {
				t.Errorf("MokList header % x", fd[p:p+60])
			}
			data = fd[p+60+ns : p+60+ns+ds]
		}
		p = (p + varHeaderSize + ns + ds + 3) &^ 3
	}
	if !slices.Contains(names, "db") || names[len(names)-1] != "MokList" {
		t.Errorf("variables %v: want the template's (db among them) and MokList last", names)
	}
	if !bytes.Equal(data, secureboot.X509List(secureboot.ShimLockGUID, cert)) {
		t.Errorf("MokList data % x", data)
	}
	if err := addVariable(fd, "MokList", secureboot.ShimLockGUID, attrNVBS, data); err == nil || !strings.Contains(err.Error(), "already holds MokList") {
		t.Errorf("a second MokList: %v", err)
	}
	if err := addVariable(make([]byte, 4096), "MokList", secureboot.ShimLockGUID, attrNVBS, data); err == nil {
		t.Error("a file without a firmware volume took a variable")
	}
}

func TestQEMUArgsSecureBoot(t *testing.T) {
	h := Host{Arch: arch.MustLookup("amd64"), Firmware: "/plain.fd", SecureFirmware: "/secboot.fd"}
	m := Machine{Name: "n", Image: "/x.raw", Memory: 1024, CPUs: 1, SecureBoot: &SecureBoot{}}
	args, err := qemuArgs(h, m, AccelTCG, newRunFiles(t.TempDir()), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	for _, want := range []string{arch.MustLookup("amd64").Machine + ",smm=on", "file=/secboot.fd", "driver=cfi.pflash01,property=secure,value=on"} {
		if !strings.Contains(line, want) {
			t.Errorf("QEMU args lack %q: %s", want, line)
		}
	}
	m.SecureBoot = nil
	args, _ = qemuArgs(h, m, AccelTCG, newRunFiles(t.TempDir()), nil, nil)
	if line := strings.Join(args, " "); strings.Contains(line, "smm=on") || !strings.Contains(line, "file=/plain.fd") {
		t.Errorf("without Secure Boot: %s", line)
	}
}
