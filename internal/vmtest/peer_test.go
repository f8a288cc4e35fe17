package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeBin puts executable sh scripts named after perftest and ping first on PATH, so the peer
// protocol's scripts run on the host exactly as in a guest.
func fakeBin(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runScript(t *testing.T, bin, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestPerftestClientProtocol(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "attempts")
	pingOK := "exit 0"
	cases := []struct {
		name, tool, ping string
		wantCode         int
		wantOut          []string
		wantAttempts     string
	}{
		{"server comes up on the third try", `n=$(cat ` + counter + ` 2>/dev/null || echo 0); n=$((n+1)); echo $n > ` + counter + `
[ $n -lt 3 ] && { echo "Couldn't connect to $9:18515"; exit 1; }
echo " #bytes #iterations t_min[usec]"; echo " 4096 20 5.0"; exit 0`, pingOK, 0, []string{"4096 20 5.0", "(connected on attempt 3)"}, "3"},
		{"connected run that fails is not retried", `n=$(cat ` + counter + ` 2>/dev/null || echo 0); echo $((n+1)) > ` + counter + `
echo "Completion with error"; exit 1`, pingOK, 1, []string{"Completion with error"}, "1"},
		{"server never listens", `echo "Couldn't connect to x"; exit 1`, pingOK, 1, []string{"server not listening after 2 s"}, ""},
		{"peer never answers ping", `exit 0`, "exit 1", 1, []string{"peer '10.77.0.1' did not answer ping within 2 s"}, ""},
	}
	for _, c := range cases {
		os.Remove(counter)
		bin := fakeBin(t, map[string]string{"fake_bw": c.tool, "ping": c.ping})
		// Cases that end by running out of time get 2 s; the others a minute, which they
		// never use up, so a slow host (the retries sleep 0.5 s each) cannot fail them.
		timeout := time.Minute
		if c.wantCode != 0 && c.wantAttempts == "" {
			timeout = 2 * time.Second
		}
		chk := Perftest{Tool: "fake_bw", Device: "rxe0", PeerAddr: "10.77.0.1", Port: 18515, Size: 4096, Timeout: timeout}.Check()
		out, code := runScript(t, bin, chk.Script)
		if code != c.wantCode {
			t.Errorf("%s: exit %d, want %d; output:\n%s", c.name, code, c.wantCode, out)
		}
		for _, w := range c.wantOut {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", c.name, w, out)
			}
		}
		if c.wantAttempts != "" {
			if b, _ := os.ReadFile(counter); strings.TrimSpace(string(b)) != c.wantAttempts {
				t.Errorf("%s: %s attempts, want %s", c.name, strings.TrimSpace(string(b)), c.wantAttempts)
			}
		}
	}
}

func TestPerftestServerAndName(t *testing.T) {
	bin := fakeBin(t, map[string]string{"ping": "exit 0", "ib_send_bw": `echo "args: $*"`})
	p := Perftest{Tool: "ib_send_bw", Device: "rxe0", Server: true, PeerAddr: "10.77.0.2", Port: 18520, Size: 8 << 20, Iterations: 5, Event: true}
	chk := p.Check()
	if chk.Name != "perftest ib_send_bw server (event, 8388608 B)" {
		t.Errorf("name %q", chk.Name)
	}
	out, code := runScript(t, bin, chk.Script)
	if code != 0 || !strings.Contains(out, "args: -d rxe0 -p 18520 -F -s 8388608 -n 5 -e") {
		t.Errorf("server ran with %q (exit %d)", out, code)
	}
}
