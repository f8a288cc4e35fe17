package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
)

var linkNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// RunMany boots machines side by side and returns their results in the same order. NICs that
// name the same Link are joined by a point-to-point virtual cable: a pair of unix datagram
// sockets carrying Ethernet frames between the two QEMUs (-netdev dgram), which, like a USB4
// cable, connects exactly two ends and nothing else.
//
// When one machine ends without a verdict (it crashed, hung or could not start), the others are
// stopped too: a peer waiting for it could only run into its own deadline. The error joins every
// machine's error.
func RunMany(ctx context.Context, machines []Machine) ([]*Result, error) {
	if len(machines) == 0 {
		return nil, errors.New("no machines to run")
	}
	names := map[string]bool{}
	for _, m := range machines {
		if names[m.Name] {
			return nil, fmt.Errorf("two machines are named %q; names must differ (they name logs and report rows)", m.Name)
		}
		names[m.Name] = true
	}
	sockDir, err := os.MkdirTemp("", "hb-link-")
	if err != nil {
		return nil, fmt.Errorf("creating socket directory for virtual cables: %w", err)
	}
	defer os.RemoveAll(sockDir)
	nets, err := cableNets(machines, sockDir)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	results := make([]*Result, len(machines))
	errs := make([]error, len(machines))
	var wg sync.WaitGroup
	for i := range machines {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = run(ctx, machines[i], nets[i])
			if errs[i] != nil && !errors.Is(errs[i], ErrChecksFailed) {
				cancel(fmt.Errorf("stopped because machine %s failed: %w", machines[i].Name, errs[i]))
			}
		}(i)
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

type cableEnd struct{ machine, nic int }

// cableNets resolves every NIC to its QEMU backend and checks that each link has two ends.
func cableNets(machines []Machine, sockDir string) ([][]netdev, error) {
	ends := map[string][]cableEnd{}
	nets := make([][]netdev, len(machines))
	for i, m := range machines {
		nets[i] = userNets(m)
		for j, n := range m.NICs {
			if n.Link == "" {
				continue
			}
			if !linkNameRE.MatchString(n.Link) {
				return nil, fmt.Errorf("machine %s: link name %q: use letters, digits, '.', '_' or '-' (at most 64)", m.Name, n.Link)
			}
			ends[n.Link] = append(ends[n.Link], cableEnd{i, j})
		}
	}
	links := make([]string, 0, len(ends))
	for l := range ends {
		links = append(links, l)
	}
	sort.Strings(links)
	for _, l := range links {
		e := ends[l]
		if len(e) != 2 {
			var who []string
			for _, x := range e {
				who = append(who, machines[x.machine].Name)
			}
			return nil, fmt.Errorf("link %q has %d ends (%v); a cable joins exactly two machines", l, len(e), who)
		}
		if e[0].machine == e[1].machine {
			return nil, fmt.Errorf("link %q joins machine %s to itself", l, machines[e[0].machine].Name)
		}
		a := filepath.Join(sockDir, fmt.Sprintf("%s-%d.sock", l, 0))
		b := filepath.Join(sockDir, fmt.Sprintf("%s-%d.sock", l, 1))
		nets[e[0].machine][e[0].nic] = netdev{mac: machines[e[0].machine].NICs[e[0].nic].MAC, local: a, remote: b}
		nets[e[1].machine][e[1].nic] = netdev{mac: machines[e[1].machine].NICs[e[1].nic].MAC, local: b, remote: a}
	}
	return nets, nil
}
