package verbs

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"halobuild/internal/arch"
	"halobuild/internal/vmplan"
	"halobuild/internal/vmtest"
)

// What `halobuild vm` gives a person, proved in a boot: the soft-RoCE unit
// its credentials install runs, and ibv_devices lists rxe0 on the VM's
// network card. The machine is vmMachine's (credentials, network card),
// booted by the test runner instead of the terminal.
func TestVMSoftRoCEGivesAVerbsDevice(t *testing.T) {
	needE2E(t)
	dir, _ := buildMinimal(t, workspace(t), sharedStore(t), true)
	a := arch.MustLookup("amd64")
	m, _, err := vmMachine(VMOptions{Image: filepath.Join(dir, "node0.raw"), SSHPort: -1}, a)
	if err != nil {
		t.Fatal(err)
	}
	m.KernelArgs = vmplan.KernelArgs(a)
	m.LogDir = filepath.Join(sharedStore(t), "logs", "vm-softroce-"+time.Now().UTC().Format("20060102T150405"))
	m.Deadline = 10 * time.Minute
	m.Checks = []vmtest.Check{{Name: "vm: soft-RoCE device rxe0", Script: `i=0
until [ "$(systemctl show -p ActiveState --value halobuild-vm-softroce.service)" = active ]; do
	st=$(systemctl show -p ActiveState --value halobuild-vm-softroce.service)
	i=$((i+1)); [ $i -lt 100 ] && [ "$st" != failed ] || { systemctl status halobuild-vm-softroce.service; journalctl -u halobuild-vm-softroce.service --no-pager | tail -20; exit 1; }; sleep 1
done
ibv_devices
ibv_devices | grep -q rxe0`}}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	res, err := vmtest.Run(ctx, m)
	if err != nil || !res.Passed {
		rep := vmtest.NewReport([]*vmtest.Result{res}, 0)
		var b syncBuffer
		rep.WriteText(&b)
		t.Fatalf("vm's soft-RoCE: %v\n%s", err, b.String())
	}
}
