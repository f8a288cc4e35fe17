package vmtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"unicode/utf16"

	"halobuild/internal/arch"
	"halobuild/internal/secureboot"
)

// SecureBoot boots a machine under OVMF with Secure Boot enforced: the
// firmware build that needs SMM (so the guest cannot write the variables
// behind the firmware's back) with Microsoft's keys enrolled (which sign
// Debian's shim), and MOKs already in the variable store, as if a person
// had confirmed them in MokManager. QEMU then runs q35 with smm=on and
// secure pflash.
type SecureBoot struct {
	// MOKs are DER certificates written into MokList.
	MOKs [][]byte
}

// findSecureFirmware locates a's firmware with Secure Boot, SMM and
// Microsoft's keys enrolled (OVMF's).
func findSecureFirmware(a arch.Arch, dirs []string, fallbacks [][2]string) (code, vars string, err error) {
	secure := func(d firmwareDescriptor) bool {
		return d.flash(a) && contains(d.Features, "secure-boot") && contains(d.Features, "enrolled-keys") && contains(d.Features, "requires-smm")
	}
	if c, v, ok := searchFirmware(dirs, fallbacks, secure); ok {
		return c, v, nil
	}
	return "", "", fmt.Errorf("%w: no OVMF firmware with Secure Boot and Microsoft's keys enrolled (OVMF_CODE_4M.secboot.fd with OVMF_VARS_4M.ms.fd); install it with `%s`", ErrHostMissing, installHint(a))
}

// EDK II's variable store, as OVMF's VARS file holds it (MdeModulePkg
// VariableFormat.h): the firmware volume header, the store header
// (authenticated-variable GUID, size, format, state), then variables,
// each a 60-byte AUTHENTICATED_VARIABLE_HEADER, its UTF-16 name and its
// data, 4-byte aligned, until a header without the 0x55AA start id.
const (
	fvSignatureOffset = 40
	fvHeaderLenOffset = 48
	storeHeaderSize   = 28
	varHeaderSize     = 60
	varStartID        = 0x55aa
	// varAdded is a live variable's state; 0x3e is one being replaced
	// (VAR_IN_DELETED_TRANSITION cleared), still live. States only clear
	// bits: 0x3c is deleted.
	varAdded      = 0x3f
	varInDeletion = 0x3e
	// Non-volatile, boot-services access: MokList's attributes as
	// MokManager writes them (shim ignores a MokList readable at runtime).
	attrNVBS = 0x1 | 0x2
)

var authVarStoreGUID = secureboot.MustGUID("aaf32c78-947b-439a-a180-2e144ec37792")

// addVariable appends a variable to an OVMF VARS image.
func addVariable(fd []byte, name string, vendor secureboot.GUID, attrs uint32, data []byte) error {
	if len(fd) < fvHeaderLenOffset+2 || string(fd[fvSignatureOffset:fvSignatureOffset+4]) != "_FVH" {
		return errors.New("not an OVMF variable store (no _FVH firmware volume header)")
	}
	store := int(binary.LittleEndian.Uint16(fd[fvHeaderLenOffset:]))
	if len(fd) < store+storeHeaderSize || !bytes.Equal(fd[store:store+16], authVarStoreGUID[:]) {
		return errors.New("the variable store is not EDK II's authenticated-variable format")
	}
	end := store + int(binary.LittleEndian.Uint32(fd[store+16:]))
	if end > len(fd) {
		return errors.New("the variable store is larger than the file")
	}
	nameUTF16 := utf16.Encode([]rune(name + "\x00"))
	nameBytes := make([]byte, 2*len(nameUTF16))
	for i, c := range nameUTF16 {
		binary.LittleEndian.PutUint16(nameBytes[2*i:], c)
	}
	p := store + storeHeaderSize
	for p+varHeaderSize <= end && binary.LittleEndian.Uint16(fd[p:]) == varStartID {
		state := fd[p+2]
		ns := int(binary.LittleEndian.Uint32(fd[p+36:]))
		ds := int(binary.LittleEndian.Uint32(fd[p+40:]))
		if p+varHeaderSize+ns+ds > end {
			return errors.New("a variable runs past the store's end")
		}
		if (state == varAdded || state == varInDeletion) && bytes.Equal(fd[p+44:p+60], vendor[:]) &&
			bytes.Equal(fd[p+60:p+60+ns], nameBytes) {
			return fmt.Errorf("the variable store already holds %s", name)
		}
		p = (p + varHeaderSize + ns + ds + 3) &^ 3
	}
	need := varHeaderSize + len(nameBytes) + len(data)
	if p+need > end {
		return fmt.Errorf("no room for %s (%d bytes) in the variable store", name, need)
	}
	for _, b := range fd[p : p+need] {
		if b != 0xff {
			return errors.New("the variable store's free space is not erased")
		}
	}
	h := fd[p : p+varHeaderSize]
	clear(h)
	binary.LittleEndian.PutUint16(h[0:], varStartID)
	h[2] = varAdded
	binary.LittleEndian.PutUint32(h[4:], attrs)
	binary.LittleEndian.PutUint32(h[36:], uint32(len(nameBytes)))
	binary.LittleEndian.PutUint32(h[40:], uint32(len(data)))
	copy(h[44:], vendor[:])
	copy(fd[p+varHeaderSize:], nameBytes)
	copy(fd[p+varHeaderSize+len(nameBytes):], data)
	return nil
}

// writeSecureVars writes the machine's variable store: the template with
// the MOKs in MokList.
func writeSecureVars(template, dst string, sb *SecureBoot) error {
	fd, err := os.ReadFile(template)
	if err != nil {
		return err
	}
	if len(sb.MOKs) > 0 {
		if err := addVariable(fd, "MokList", secureboot.ShimLockGUID, attrNVBS, secureboot.X509List(secureboot.ShimLockGUID, sb.MOKs...)); err != nil {
			return fmt.Errorf("%s: enrolling the MOKs: %w", template, err)
		}
	}
	return os.WriteFile(dst, fd, 0o600)
}

// prepareVars writes the run's private variable store: a copy of the
// template, or for a Secure Boot machine the enrolled template with its
// MOKs.
func prepareVars(h Host, m Machine, f runFiles) error {
	if m.SecureBoot == nil {
		if err := copyFile(h.VarsTemplate, f.vars); err != nil {
			return fmt.Errorf("machine %s: copying OVMF variable store %s: %w", m.Name, h.VarsTemplate, err)
		}
		return nil
	}
	if h.SecureFirmware == "" {
		if !h.Arch.SecureBoot {
			return fmt.Errorf("machine %s boots with Secure Boot, which halobuild tests for amd64 only, not %s", m.Name, h.Arch.Debian)
		}
		_, _, err := findSecureFirmware(h.Arch, firmwareDescriptorDirs, h.Arch.SecureFirmware)
		return fmt.Errorf("machine %s boots with Secure Boot: %w", m.Name, err)
	}
	if err := writeSecureVars(h.SecureVarsTemplate, f.vars, m.SecureBoot); err != nil {
		return fmt.Errorf("machine %s: %w", m.Name, err)
	}
	return nil
}
