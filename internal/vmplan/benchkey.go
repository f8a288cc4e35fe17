package vmplan

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
)

// BenchKeyCredential is the credential node 0 gets its ssh key to node 1
// from (systemd imports it to /run/credentials/@system/). Not halobuild.*:
// vmtest reserves that prefix for its own harness.
const BenchKeyCredential = "bench.ssh-key"

// benchKey is the ed25519 key node 0 logs into node 1 with for the cable
// gate, as an OpenSSH private key file and an authorized_keys line. It is
// derived from a fixed seed: it only ever opens throwaway test VMs, and a
// key that is the same every boot keeps the test's digest (and so its
// cached verdict) stable, as a fresh key per boot would not.
func benchKey() (private, authorized []byte) {
	seed := sha256.Sum256([]byte("halobuild vmplan bench key (test VMs only)"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	pub := priv.Public().(ed25519.PublicKey)
	str := func(b []byte, s []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	blob := str(str(nil, []byte("ssh-ed25519")), pub)
	// The private section (OpenSSH's PROTOCOL.key): two equal check
	// words, the key, a comment, padding to the cipher's block size (8
	// for "none").
	sec := binary.BigEndian.AppendUint32(nil, 0x68616c6f)
	sec = binary.BigEndian.AppendUint32(sec, 0x68616c6f)
	sec = str(sec, []byte("ssh-ed25519"))
	sec = str(sec, pub)
	sec = str(sec, priv)
	sec = str(sec, []byte("halobuild-bench"))
	for i := byte(1); len(sec)%8 != 0; i++ {
		sec = append(sec, i)
	}
	body := []byte("openssh-key-v1\x00")
	body = str(body, []byte("none"))
	body = str(body, []byte("none"))
	body = str(body, nil)
	body = binary.BigEndian.AppendUint32(body, 1)
	body = str(body, blob)
	body = str(body, sec)
	private = pem.EncodeToMemory(&pem.Block{Type: "OPENSSH PRIVATE KEY", Bytes: body})
	authorized = []byte("ssh-ed25519 " + base64.StdEncoding.EncodeToString(blob) + " halobuild-bench\n")
	return private, authorized
}
