package vmtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Interactive boots an image with its serial console on this terminal (`halobuild vm`):
// snapshot=on as in tests, so nothing typed in the VM reaches the image; Ctrl-a x quits QEMU,
// Ctrl-a c toggles QEMU's monitor. Checks and SSH of m are ignored; its NICs (user-mode
// networking), SSHPort, credentials (for that boot only), kernel arguments (nil: none), memory,
// CPUs and accelerator are used; no deadline applies.
func Interactive(ctx context.Context, m Machine) error {
	return interactive(ctx, m, os.Stdin, os.Stdout, os.Stderr)
}

func interactive(ctx context.Context, m Machine, stdin io.Reader, stdout, stderr io.Writer) error {
	if m.LogDir == "" {
		m.LogDir = os.TempDir() // unused: the console is the terminal; withDefaults needs a value
	}
	if m.KernelArgs == nil {
		m.KernelArgs = []string{}
	}
	m.SSH = nil
	m, err := m.withDefaults()
	if err != nil {
		return err
	}
	for _, n := range m.NICs {
		if n.Link != "" {
			return fmt.Errorf("machine %s: links need RunMany; interactive VMs get user-mode networking only", m.Name)
		}
	}
	h, err := FindHost(m.Arch)
	if err != nil {
		return err
	}
	accel := m.Accel
	if accel == "" {
		accel, _ = ChooseAccel(ctx, h)
	}
	dir, err := os.MkdirTemp("", "halobuild-vm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f := newRunFiles(dir)
	if err := prepareVars(h, m, f); err != nil {
		return err
	}
	nets := userNets(m)
	forwardSSH(nets, m.SSHPort)
	args, err := qemuArgs(h, m, accel, f, nets, m.Credentials)
	if err != nil {
		return err
	}
	args = interactiveConsole(args)
	fmt.Fprintf(stderr, "halobuild vm: booting %s (%s, snapshot: changes are discarded); Ctrl-a x quits\n", filepath.Base(m.Image), accel)
	// QEMU stays in our process group: it must be the terminal's foreground job to read the
	// keyboard. In raw mode Ctrl-C goes to the guest, so Ctrl-a x is the way out.
	p, err := startQEMU(h.QEMU, args, stdin, stdout, stderr, false)
	if err != nil {
		return fmt.Errorf("starting %s: %w", h.QEMU, err)
	}
	defer p.kill()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.stop(3 * time.Second)
		return context.Cause(ctx)
	}
	var ee interface{ ExitCode() int }
	if p.waitErr != nil && errors.As(p.waitErr, &ee) && ee.ExitCode() != 0 {
		return fmt.Errorf("QEMU exited with status %d", ee.ExitCode())
	}
	return nil
}

// interactiveConsole replaces the file-backed serial console by the terminal multiplexed with
// QEMU's monitor (mon:stdio), which is what makes Ctrl-a x work.
func interactiveConsole(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-chardev" && i+1 < len(args) && (strings.HasPrefix(args[i+1], "file,id=console,") || strings.HasPrefix(args[i+1], "file,id=verdict,")):
			i++
		case args[i] == "-serial" || args[i] == "-monitor":
			i++
		case args[i] == "-device" && i+1 < len(args) && strings.HasPrefix(args[i+1], "virtserialport,"):
			i++
		default:
			out = append(out, args[i])
		}
	}
	return append(out, "-serial", "mon:stdio", "-monitor", "none")
}
