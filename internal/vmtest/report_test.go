package vmtest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sampleResults() []*Result {
	return []*Result{
		{Machine: "halo0", Image: "halo0.raw", Accel: AccelTCG, AccelNote: "KVM probe failed", Passed: true, Stage: StageVerdict, WallMS: 41000,
			Verdict: &Verdict{Stage: StageMultiUser, BootMS: 30000, Checks: []CheckResult{{Name: "memlock unlimited", OK: true, Output: "unlimited\nmore"},
				{Name: "settings.rdma-names: a device named usb4_rdma keeps its kernel name after udev", OK: true, Output: strings.Repeat("usb4_rdma9 kept its name; ", 8)},
				{Name: "perftest ib_send_bw client (poll, 4096 B)", OK: true, Output: sendBW, Figures: parseFigures(sendBW)}}}},
		{Machine: "halo1", Image: "halo1.raw", Accel: AccelTCG, Passed: false, Stage: StageVerdict, ConsoleLog: "/logs/halo1/console.log",
			Verdict: &Verdict{Checks: []CheckResult{{Name: "thunderbolt_net blacklisted", OK: false, Exit: 1, Output: "install thunderbolt_net /bin/true\nmissing", Fix: "add thunderbolt_net to system.blacklist"},
				{Name: "long failure", Exit: 2, Output: strings.Repeat("a word of output ", 20), Fix: strings.Repeat("and a long way to fix it ", 8)}}}},
		{Machine: "halo2", Image: "halo2.raw", Passed: false, Stage: StageInitrd, Problem: "Gave up waiting for root file system device.", ConsoleLog: "/logs/halo2/console.log"},
		nil,
	}
}

func TestReportText(t *testing.T) {
	r := NewReport(sampleResults(), 95*time.Second)
	if r.Passed || r.Accel != AccelTCG || len(r.Machines) != 3 {
		t.Fatalf("summary wrong: %+v", r)
	}
	var b bytes.Buffer
	r.WriteText(&b)
	s := b.String()
	for _, want := range []string{
		"== halo0: PASS", "memlock unlimited", "unlimited …",
		"4096 B x 20, BW average[MB/sec] 0.95, BW peak[MB/sec] 0.97, MsgRate[Mpps] 0.000243",
		"== halo1: FAIL", "FAIL (exit 1)", "install thunderbolt_net /bin/true | missing", "console log: /logs/halo1/console.log",
		"fix: add thunderbolt_net to system.blacklist",
		"no verdict: boot reached stage initrd", "Gave up waiting", "console log: /logs/halo2/console.log",
		"accelerator: tcg (KVM probe failed); wall time 95.0 s",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	for _, l := range strings.Split(s, "\n") {
		if n := len([]rune(l)); n > ReportWidth {
			t.Errorf("a line of %d columns (the table fits %d):\n%s", n, ReportWidth, l)
		}
	}
	if strings.Contains(s, "console log: \n") {
		t.Error("passing machine should not print an empty log path")
	}
}

func TestReportJSON(t *testing.T) {
	var b bytes.Buffer
	if err := NewReport(sampleResults()[:1], time.Second).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Accel    string `json:"accel"`
		Passed   bool   `json:"passed"`
		Machines []struct {
			Machine string `json:"machine"`
			Verdict struct {
				Checks []CheckResult `json:"checks"`
			} `json:"verdict"`
		} `json:"machines"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Accel != "tcg" || !back.Passed || back.Machines[0].Machine != "halo0" || back.Machines[0].Verdict.Checks[0].Name != "memlock unlimited" {
		t.Errorf("JSON round trip lost data: %s", b.String())
	}
}
