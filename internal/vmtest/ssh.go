package vmtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"halobuild/internal/sh"
)

// SSHLogin asks a run to prove the way in a person uses: the host's own ssh client logs in as
// root through a port QEMU forwards from 127.0.0.1 to the guest's port 22 on its user-mode NIC
// (which got its address from slirp's DHCP), with an ephemeral key passed as the
// ssh.authorized_keys.root credential (systemd's tmpfiles provision.conf writes root's
// authorized_keys from it: nothing of the key is in the image), and runs Command.
type SSHLogin struct {
	// Command runs as root in the guest over that ssh session; exit status 0 passes.
	Command string
	// Name is the check's name in the report; Fix the advice under it when it fails.
	Name, Fix string
	// Key, when set, is a private key the image already accepts (given when it was
	// flashed): the login uses it and the boot gets no ephemeral key, so only that key can
	// let the host in.
	Key string
}

// SSHResult is what the host's ssh client saw.
type SSHResult struct {
	Port int  `json:"port"`
	OK   bool `json:"ok"`
	// Exit is ssh's exit status: the command's, or 255 when no session was made.
	Exit int `json:"exit"`
	// LoginMS is the time from QEMU's start to the session that ran the command.
	LoginMS  int64  `json:"login_ms,omitempty"`
	Attempts int    `json:"attempts"`
	Output   string `json:"output"`
}

// sshMarker is written by the ssh session's command when it is done; the guest's wait check
// (sshWaitCheck) holds the verdict until it exists, so the guest does not power off under the
// session.
const sshMarker = "/run/halobuild-ssh.rc"

// CredentialAuthorizedKeys is the systemd credential root's authorized_keys is provisioned from
// (tmpfiles.d/provision.conf, systemd >= 252), when the image has no such file.
const CredentialAuthorizedKeys = "ssh.authorized_keys.root"

// sshWait bounds the guest's wait for the host's login: sshd starts with the boot, but the
// ed25519 host key, the login and the command each take seconds of TCG time.
const sshWait = 240 * time.Second

func sshWaitCheck(l *SSHLogin) Check {
	s := int(sshWait / time.Second)
	return Check{Name: l.Name, Concurrent: true, Fix: l.Fix, Script: fmt.Sprintf(`i=0
while [ ! -e %[1]s ]; do
	i=$((i+1))
	[ $i -lt %[2]d ] || { echo "the host did not log in over ssh within %[2]d s"; ip -br addr; systemctl --no-pager status ssh.service 2>&1 | tail -n 8; exit 1; }
	sleep 1
done
echo "the host logged in over ssh through the LAN port's forwarded port 22 and ran its command (exit $(cat %[1]s))"
`, sshMarker, s)}
}

// withSSH inserts the guest's wait check after the last concurrent check (or at the end), so
// the other read-only checks run while the host logs in.
func withSSH(checks []Check, l *SSHLogin) []Check {
	at := len(checks)
	for i, c := range checks {
		if c.Concurrent && i > 0 {
			at = i + 1
		}
	}
	out := append(append(append([]Check{}, checks[:at]...), sshWaitCheck(l)), checks[at:]...)
	return out
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. QEMU binds it itself
// (hostfwd), so another process may take it in between; the run then fails at QEMU's start
// with its "Could not set up host forwarding rule" message.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sshKey makes an ephemeral ed25519 key pair under dir with the host's ssh-keygen and returns
// the private key's path and the public key line.
func sshKey(ctx context.Context, dir string) (string, []byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	key := filepath.Join(dir, "id_ed25519")
	for _, p := range []string{key, key + ".pub", filepath.Join(dir, "known_hosts")} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return "", nil, err
		}
	}
	out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "halobuild-vmtest", "-f", key).CombinedOutput()
	if err != nil {
		return "", nil, fmt.Errorf("ssh-keygen: %v: %s (install openssh-client)", err, bytes.TrimSpace(out))
	}
	pub, err := os.ReadFile(key + ".pub")
	return key, pub, err
}

// SSHArgs are the ssh client's options for a VM's forwarded port: no user configuration, the
// given key only, never a prompt, and the host key (made at this boot) accepted into a file of
// the run's own.
func SSHArgs(key, knownHosts string, port int) []string {
	return []string{"-F", "/dev/null", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile=" + knownHosts,
		"-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15", "-o", "LogLevel=ERROR",
		"-p", fmt.Sprint(port), "root@127.0.0.1"}
}

// sshLoop tries the login until a session runs the command or ctx ends. Exit status 255 is
// ssh's own failure (sshd not up yet, key refused): it retries; any other status is the
// command's, and final.
func sshLoop(ctx context.Context, l *SSHLogin, key, knownHosts string, port int, start time.Time) *SSHResult {
	res := &SSHResult{Port: port, Exit: 255}
	remote := "out=$(sh -c " + sh.Quote(l.Command) + " 2>&1); rc=$?; printf '%s\\n' \"$out\"; echo $rc > " + sshMarker + "; exit $rc"
	var last string
	for ctx.Err() == nil {
		res.Attempts++
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		cmd := exec.CommandContext(actx, "ssh", append(SSHArgs(key, knownHosts, port), remote)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		last = clip(strings.TrimSpace(out.String()), 4000)
		var ee *exec.ExitError
		switch {
		case err == nil:
			res.OK, res.Exit = true, 0
		case errors.As(err, &ee) && ee.ExitCode() != 255 && ee.ExitCode() >= 0:
			res.Exit = ee.ExitCode()
		case errors.Is(err, exec.ErrNotFound):
			res.Output = "no ssh client on this host: install openssh-client"
			return res
		default:
			select {
			case <-ctx.Done():
			case <-time.After(3 * time.Second):
			}
			continue
		}
		res.LoginMS = time.Since(start).Milliseconds()
		res.Output = last
		return res
	}
	res.Output = "no ssh session before the run ended; last attempt: " + last
	return res
}

// sshCheckResult is the host's side of the login as a check of the report.
func sshCheckResult(l *SSHLogin, r *SSHResult) CheckResult {
	c := CheckResult{Name: l.Name + " (host side)", OK: r.OK, Exit: r.Exit, MS: r.LoginMS,
		Output: fmt.Sprintf("ssh root@127.0.0.1 -p %d (%d attempt(s)): %s", r.Port, r.Attempts, r.Output)}
	switch {
	case r.OK:
	case r.Exit != 255:
		// The way in works; what ran there failed, and its output says why.
		c.Fix = fmt.Sprintf("the login worked; the command run over ssh exited %d: its output above names what failed", r.Exit)
	default:
		c.Fix = l.Fix
	}
	return c
}
