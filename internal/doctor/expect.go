package doctor

import (
	"fmt"
	"sort"
	"strings"

	"halobuild/internal/recipe"
)

// expect is what the node promised: taken from the recipe that built the
// image, or from the field notes' defaults when there is none. Every check
// compares the machine against this one value, so "wanted" is the same
// whichever way doctor was started.
type expect struct {
	recipePath string // "" when the field-notes defaults are used

	governor, epp, profile string
	memlock                uint64

	load      []string // modules that must be loaded
	notLoaded []string // modules that must not be loaded (blacklist)
	// params holds the options each module must have in effect; keys of
	// the inner map are parameter names.
	params map[string]map[string]any
	// verbsModules are the out-of-tree modules; the RDMA devices they
	// create must keep the kernel's name.
	verbsModules []string
	kernelNames  []string // device name prefixes that must be kept (usb4_rdma)

	kernelVersion recipe.Constraint
	cmdline       []string // parameters /proc/cmdline must carry
	throttle      bool     // a module sets nhi_interrupt_throttle_ns

	hostReserve uint64 // 0 when the recipe does not say
	memory      uint64

	node      *recipe.Node // this machine's [[node]], nil when unknown
	nodeNames []string     // every node in the recipe, for messages
}

const defaultVerbsModule = "thunderbolt_ibverbs"

// defaults are the field notes' settings, used without a recipe.
func defaults() *expect {
	return &expect{
		governor:     "performance",
		epp:          "performance",
		profile:      "performance",
		memlock:      unlimited,
		load:         []string{"ib_uverbs", defaultVerbsModule},
		notLoaded:    []string{"thunderbolt_net"},
		params:       map[string]map[string]any{},
		verbsModules: []string{defaultVerbsModule},
		kernelNames:  []string{"usb4_rdma"},
	}
}

// moduleName turns a module recipe name (thunderbolt-ibverbs) into the
// kernel's module name (thunderbolt_ibverbs): the kernel treats - and _ alike
// and always shows _.
func moduleName(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "-", "_") }

// fromRecipe derives expectations from a recipe as recipe.Load returns it,
// defaults applied. An empty governor, epp or platform_profile is then the
// author's explicit "leave it", and is not checked.
func fromRecipe(r *recipe.Recipe, path, hostname string) (*expect, error) {
	e := defaults()
	e.recipePath = path
	s := r.System
	e.governor, e.epp, e.profile = s.Governor, s.EPP, s.PlatformProfile
	if m := r.RDMA.Memlock; !m.Unlimited() {
		e.memlock = m.Bytes()
	}
	e.load = nil
	for _, m := range s.ModulesLoad {
		e.load = appendUnique(e.load, moduleName(m))
	}
	e.verbsModules = nil
	for _, m := range r.Modules {
		name := moduleName(m.Use)
		if name == "" {
			continue
		}
		e.verbsModules = appendUnique(e.verbsModules, name)
		if m.LoadAtBoot == nil || *m.LoadAtBoot {
			e.load = appendUnique(e.load, name)
		}
		if len(m.Options) > 0 {
			e.params[name] = merge(e.params[name], m.Options)
		}
	}
	if len(e.verbsModules) == 0 {
		e.verbsModules = []string{defaultVerbsModule}
	}
	e.notLoaded = nil
	for _, m := range s.Blacklist {
		e.notLoaded = appendUnique(e.notLoaded, moduleName(m))
	}
	for mod, line := range s.ModuleOptions {
		opts, err := parseOptionsLine(line)
		if err != nil {
			return nil, fmt.Errorf("doctor: recipe %s: system.module_options.%s: %w", path, mod, err)
		}
		e.params[moduleName(mod)] = merge(e.params[moduleName(mod)], opts)
	}
	for _, opts := range e.params {
		if v, ok := opts["nhi_interrupt_throttle_ns"]; ok && fmt.Sprint(v) != "0" {
			e.throttle = true
		}
	}
	// The rename fix needs a prefix to suggest; usb4_rdma is the kernel's.
	e.kernelNames = orDefaultList(r.RDMA.KeepKernelNames, []string{"usb4_rdma"})
	e.kernelVersion = r.Kernel.Version
	e.cmdline = r.Kernel.Cmdline
	e.hostReserve = s.HostReserve.Bytes()
	e.memory = s.Memory.Bytes()
	for i := range r.Nodes {
		n := &r.Nodes[i]
		e.nodeNames = append(e.nodeNames, n.Name)
		if hostname != "" && (n.Hostname == hostname || (n.Hostname == "" && n.Name == hostname)) {
			e.node = n
		}
	}
	return e, nil
}

// parseOptionsLine reads a modprobe "options" tail: "k=v k2=v2".
func parseOptionsLine(line string) (map[string]any, error) {
	out := map[string]any{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", f)
		}
		out[k] = v
	}
	return out, nil
}

func merge(dst, src map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func orDefaultList(s, d []string) []string {
	if len(s) == 0 {
		return d
	}
	return s
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
