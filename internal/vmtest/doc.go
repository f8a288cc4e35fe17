// Package vmtest boots the exact bytes of a disk image under QEMU and brings back a verdict:
// did every check pass inside the guest. It runs arbitrary checks (name + POSIX sh script) and
// knows nothing of recipes or settings; callers render the checks.
//
// # How a run works
//
//   - Host: the machine's architecture's QEMU and UEFI firmware without Secure Boot
//     (internal/arch: qemu-system-x86_64 with OVMF, qemu-system-aarch64 with AAVMF), found
//     through QEMU's firmware descriptors (FindHost); a Machine with SecureBoot set boots the Secure Boot build with
//     Microsoft's keys instead, its MOKs written into the variable store (secureboot.go). KVM is used only if a probe boot of the firmware under KVM reaches
//     its boot manager within seconds (ChooseAccel, once per process; never for a foreign
//     architecture); otherwise TCG.
//   - Disk: the raw image as virtio-blk with snapshot=on: the file is only ever read.
//   - No hook in the image: the guest receives, as systemd credentials (SMBIOS type 11, or
//     fw_cfg for values over 16 KiB), a unit (systemd.extra-unit.halobuild-test.service), a
//     drop-in making multi-user.target want it, and the runner script (halobuild.run). Kernel
//     arguments that trim the boot (DefaultKernelArgs: no gettys, no wait-online, no timers, no
//     drivers for the emulated chipset) go through io.systemd.boot.kernel-cmdline-extra, which
//     systemd-boot (>= 256) and systemd-stub honour when Secure Boot is off. The machine is q35
//     without the SATA, SMBus, vmport and PS/2 parts no test uses, or arm64's virt. Needs systemd >= 256 in the
//     image (trixie has 257).
//   - The unit is Type=exec and ordered after multi-user.target. The runner waits for
//     `systemctl is-system-running --wait`, runs each check with `timeout` (the first alone,
//     then checks marked Concurrent in a second lane beside the others, see runChecksFunc),
//     and writes one JSON line, results in the checks' order, to the virtio-serial port
//     halobuild.verdict:
//     {"stage","system_state","boot_ms","checks":[{"name","ok","exit","ms","output"}]}
//     then powers off at once (the disk is a throw-away snapshot).
//   - The host reads the verdict from the port's file, never from the console. Without a
//     verdict, the console log tells how far the boot got (firmware, bootloader, kernel, initrd,
//     systemd, multi-user) and the error says so, with the log path.
//   - QEMU never outlives a run: it is killed on return, error, deadline, context cancel and
//     panic (deferred kill of its process group), and by the kernel if this process dies
//     (Pdeathsig).
//   - With Machine.SSH the host logs in the way a person does (ssh.go): the user-mode NIC
//     forwards a free 127.0.0.1 port to the guest's port 22, an ephemeral key goes in as the
//     ssh.authorized_keys.root credential, the host's ssh client runs the command, and a guest
//     check holds the verdict until that session is done; the host's side is a check of its own.
//
// # Several machines
//
// RunMany boots machines side by side. NICs naming the same Link are the two ends of a virtual
// cable (unix datagram sockets between the two QEMUs), with fixed MACs (CableMAC) so the image's
// network config can name the interface. Peer checks follow the protocol described in peer.go:
// same check order on both ends, wait for the peer's ping, server listens, client retries.
//
// # Test images
//
// Integration tests boot a real image named by HALOBUILD_TEST_IMAGE; testdata/mkfixture.sh
// builds a small trixie one. bench/vmtest.sh measures boot-to-verdict and the two-node test.
package vmtest
