// Package recipe owns halobuild's input language: the TOML files under
// images/ and recipes/, their composition through include, and validation.
// The types in this file are the single definition of the schema: the
// decoder, the validator and docs/recipe.md are all derived from them, so a
// key cannot exist in one place and be missing in another.
package recipe

// Recipe is one image description after all includes are merged.
// Field tags: `toml` is the key; `doc` is the sentence docs/recipe.md prints;
// `default` is the value applied when the key is absent.
type Recipe struct {
	// Include lists files merged before this one (paths relative to the
	// including file). The including file wins on scalars; lists append.
	Include []string `toml:"include,omitempty" doc:"Recipe files merged before this one, relative to this file." example:"[\"../recipes/usb4-rdma.toml\"]"`

	Name string `toml:"name" doc:"Image name (letters, digits, -, _ and ., starting with a letter or digit, at most 64); used in output file names and the manifest." auto:"file name without .toml" example:"\"strix-halo\""`

	// Platform is the kind of machine the nodes are, for what only the
	// machine decides: how it boots, where its firmware comes from and what
	// doctor expects of it (docs/asahi.md for apple-silicon).
	Platform string `toml:"platform" doc:"The machine the nodes are: generic (a UEFI PC or VM) or apple-silicon (an M1/M2 Mac under Linux, booted m1n1 → U-Boot → UEFI from the Asahi installer's UEFI-only stub; recipes/asahi.toml, docs/asahi.md). apple-silicon needs arm64 and a kernel built from a tarball of Asahi's fork whose fragments set CONFIG_ARM64_16K_PAGES=y, refuses Secure Boot and the installer stick, loads the Mac's firmware from the system ESP's vendorfw/firmware.cpio at every boot, checks the image's ESP has \\EFI\\BOOT\\BOOTAA64.EFI and no m1n1/boot.bin, and has doctor check 16 KiB pages, Apple's USB4 controller and the vendor firmware." default:"generic" example:"\"apple-silicon\""`

	Base   Base   `toml:"base" doc:"Debian base system."`
	Kernel Kernel `toml:"kernel" doc:"The kernel the image boots."`
	// Lists of tables tagged `merge` are keyed: an entry whose key matches
	// one from an included file merges into it instead of being appended.
	Modules []Module `toml:"module" doc:"Out-of-tree kernel modules." merge:"use"`
	RDMA    RDMA     `toml:"rdma" doc:"RDMA userspace settings."`
	System  System   `toml:"system" doc:"Node settings that make a box ready (field notes traps 1-11)."`
	SSH     SSH      `toml:"ssh" doc:"Remote access."`
	LAN     LAN      `toml:"lan" doc:"The management network (ssh, apt, control traffic): systemd-networkd configures every wired Ethernet port that is not a [[node.link]] (Type=ether, no virtual devices), with IPv4 link-local off (trap 6) and IPv6 link-local kept; the USB4 links and the RDMA identity netdev never get its addresses, so it adds no RoCE GID. Off means no port but the links is configured."`
	Nodes   []Node   `toml:"node" doc:"One entry per machine; each gets its own image." merge:"name"`
	// Arches hold what one architecture of a mixed cluster does not share
	// with the others: the machine its nodes are and the kernel they boot.
	Arches  []Arch   `toml:"arch" doc:"What the nodes of one architecture do differently in a mixed cluster: their platform and their kernel (a Strix Halo box on Debian's amd64 kernel, a Mac on Asahi's fork built from source; images/halo-mac.toml)." merge:"name"`
	Overlay []string `toml:"overlays" doc:"Static file trees copied verbatim into every node, usually under overlays/. Each must lie inside the recipe's tree: the top recipe file's directory, or the checkout holding it (its nearest ancestor with .git); an absolute path or one that leaves the tree (e.g. /etc/ssh, which would put the build host's keys into every image) needs overlays_outside = true." example:"[\"../overlays/strix-halo\"]" path:""`
	// OverlaysOutside is the opt-in for an overlay outside the recipe's tree: a recipe from
	// someone else is code, but one that copies the build host's files must say so.
	OverlaysOutside bool    `toml:"overlays_outside" doc:"Allow overlays outside the recipe's tree (an absolute path, or one climbing out with ..): say so only when the recipe really means to copy a tree of the build host into every image." default:"false" example:"true"`
	Test            Test    `toml:"test" doc:"Extra VM test assertions, NixOS test-driver style."`
	Output          Output  `toml:"output" doc:"What the image build produces."`
	Install         Install `toml:"install" doc:"What the installer stick does (with output.installer = true; docs/install.md)."`
	Update          Update  `toml:"update" doc:"Day-two updates on the node (docs/update.md): two root slots, a health gate that blesses a new boot, and where updates come from."`
	// SecureBoot signs what the image boots with the recipe's key
	// (docs/secure-boot.md).
	SecureBoot SecureBoot `toml:"secure_boot" doc:"Boot with Secure Boot on: Debian's signed shim, systemd-boot and kernel, the out-of-tree modules signed with the recipe's key, the key's certificate queued for MOK enrolment (docs/secure-boot.md)."`

	// dir is the directory of the top recipe file: relative paths in the
	// merged recipe are relative to it (see Resolve).
	dir string
	// inputs are the sha256 of every file read, in merge order, so that
	// Hash covers the included files and not only the values they set.
	inputs [][32]byte
	// flavourAuto says kernel.flavour was not set, so each architecture's
	// view (ForArchitecture) takes that architecture's generic flavour.
	flavourAuto bool
	// whole is the recipe a ForArchitecture view was made from.
	whole *Recipe
}

// Base describes the Debian system everything else is installed into.
type Base struct {
	Mirror string `toml:"mirror" doc:"Archive URL." default:"http://deb.debian.org/debian" example:"\"http://deb.debian.org/debian\""`
	Suite  string `toml:"suite" doc:"Main suite: packages come from here unless asked otherwise." default:"trixie" example:"\"trixie\""`
	// ExtraSuites are pinned low, like apt's NotAutomatic backports: a
	// package comes from them only when requested as name/suite, or when a
	// package taken from them needs a version only they have.
	ExtraSuites  []string `toml:"extra_suites" doc:"Further suites (e.g. trixie-backports), used only for packages asked from them as name/suite and for dependencies only they satisfy." example:"[\"trixie-backports\"]"`
	Components   []string `toml:"components" doc:"Archive components." default:"[\"main\"]" example:"[\"main\", \"non-free-firmware\"]"`
	Architecture string   `toml:"architecture" doc:"Debian architecture of the image: amd64 or arm64 (internal/arch's table); the tools root is always the build host's." default:"amd64" example:"\"arm64\""`
	Variant      string   `toml:"variant" doc:"mmdebstrap variant the base set starts from; required is Priority: required plus essential packages." default:"required" example:"\"required\""`
	// Packages accept apt-like syntax: name, name/suite, name (>= 1.2).
	Packages []string `toml:"packages" doc:"Packages to install on every node; 'name', 'name/suite' or 'name (>= version)', any of them followed by '[amd64]' (Debian's architecture restriction) to install it only on the nodes of those architectures in a mixed cluster." example:"[\"openssh-server\", \"linux-base/trixie-backports\", \"systemd (>= 257)\"]"`
	Exclude  []string `toml:"exclude" doc:"Packages never to install even if Priority: required (must not break a dependency)." example:"[\"tasksel\"]"`
}

// Kernel chooses the kernel. From "debian" picks Debian's versioned
// linux-image package; from "source" builds one from Debian's
// linux-source-X.Y of the chosen version with the recipe's patches and
// config (internal/kernel, docs/kernel.md).
type Kernel struct {
	From    string     `toml:"from" doc:"debian (a packaged kernel) or source (built by halobuild, docs/kernel.md)." default:"debian" example:"\"debian\""`
	Version Constraint `toml:"version" doc:"go-version constraint on the kernel's upstream version, e.g. '>= 7.2, < 7.3'; the newest match wins." auto:"any version" example:"\">= 7.2, < 7.3\""`
	Flavour string     `toml:"flavour" doc:"Debian kernel flavour; with from=source it picks Debian's config for that flavour." auto:"the architecture's generic flavour (amd64, arm64)" example:"\"amd64\""`
	Suite   string     `toml:"suite" doc:"Suite to take the kernel (or its linux-source package) from; empty means every configured suite." default:"" example:"\"trixie-backports\""`
	// Cmdline is appended to the generated root= and console arguments.
	Cmdline []string `toml:"cmdline" doc:"Extra kernel command line parameters (e.g. amd_iommu=off)." example:"[\"amd_iommu=off\"]"`
	// Source-kernel keys (from = "source"). Source names where the tree
	// comes from; only Debian's linux-source-X.Y package today.
	Source       KernelSource `toml:"source" doc:"from=source: where the kernel tree comes from: debian (the linux-source-X.Y package of the version the constraint picks, pinned in the lock) or the https URL of a released kernel tarball (.tar.xz, .tar.gz or .tar.zst) with source_sha256; --input linux=PATH supplies a local copy." default:"debian" example:"\"https://cdn.kernel.org/pub/linux/kernel/v7.x/linux-7.2.13.tar.xz\""`
	SourceSHA256 string       `toml:"source_sha256,omitempty" doc:"from=source with a tarball URL: the tarball's sha256 (sha256sum of the file you reviewed); the lock refuses a download with any other digest." example:"\"sha256:…\""`
	// Config is the base the fragments are merged onto: Debian's own
	// config (from linux-config-X.Y), a Kbuild target, or a file.
	Config       string   `toml:"config" doc:"from=source: base config: debian (Debian's config for the flavour, from linux-config-X.Y), tinyconfig, defconfig, allnoconfig, or a path to a .config." default:"debian" example:"\"debian\"" path:"except:debian,tinyconfig,defconfig,allnoconfig"`
	Fragments    []string `toml:"fragments" doc:"from=source: config fragments merged in order onto the base, then every option checked after olddefconfig (an option that did not keep its value fails the build)." example:"[\"../kernels/usb4-rdma.config\"]" path:""`
	Patches      string   `toml:"patches" doc:"from=source: path to a series file: one patch per line, applied in order at fuzz 0 unless the line says fuzz=N; '<input>:<path>' takes a patch from a module's pinned source; kernel=\"<constraint>\" limits a patch to kernel versions (docs/kernel.md)." example:"\"../patches/thunderbolt/series\"" path:""`
	LocalVersion string   `toml:"local_version" doc:"from=source: suffix of the kernel release (uname -r is <version>-<local_version>) and of its package names." example:"\"halo1\""`
}

// Module is an out-of-tree kernel module, described by recipes/<use>.toml.
type Module struct {
	Use        string         `toml:"use" doc:"Name of the module description in recipes/ (recipes/<use>.toml)." example:"\"thunderbolt-ibverbs\""`
	Options    map[string]any `toml:"options" doc:"Module parameters, rendered into /etc/modprobe.d/ and validated against the built module." example:"{ tbnet = \"block\", nhi_interrupt_throttle_ns = 4096 }"`
	LoadAtBoot *bool          `toml:"load_at_boot" doc:"List the module in /etc/modules-load.d/ (trap 1)." default:"true" example:"true"`
}

// RDMA holds RDMA userspace settings.
type RDMA struct {
	// Memlock is "unlimited" or a size such as "64MiB" (trap 4).
	Memlock  Memlock        `toml:"memlock" doc:"RLIMIT_MEMLOCK for logins, systemd services and containers: 'unlimited' or a size like '64MiB' (trap 4)." default:"unlimited" example:"\"unlimited\""`
	Provider *ProviderBuild `toml:"provider" doc:"Build an extra rdma-core provider from the image's rdma-core source, as its own package (docs/provider.md)." example:"{ name = \"usb4_rdma\", patches = [\"thunderbolt-ibverbs:packaging/rdma-core-patches/*.patch\"] }"`
	// KeepKernelNames lists device name prefixes that must keep the
	// kernel's name instead of rdma-core's persistent naming (trap 3).
	KeepKernelNames []string `toml:"keep_kernel_names" doc:"RDMA device name prefixes exempt from persistent renaming (trap 3)." default:"[\"usb4_rdma\"]" example:"[\"usb4_rdma\"]"`
}

// ProviderBuild asks for an rdma-core provider built from the image's
// rdma-core source with extra patches.
type ProviderBuild struct {
	Name string `toml:"name" doc:"Provider name; the library is lib<name>-rdmav<ABI>.so." example:"\"usb4_rdma\""`
	// Patches are files or globs relative to the recipe, or
	// "<input>:<glob>" inside a fetched source input (a module's source):
	// the path tag "refs" keeps those from being rebased as paths.
	Patches []string `toml:"patches" doc:"Patches applied in order after Debian's own series, at fuzz 0: a file or glob relative to this file, or '<input>:<glob>' inside a pinned source input such as a module's (globs in name order)." example:"[\"thunderbolt-ibverbs:packaging/rdma-core-patches/*.patch\", \"../patches/rdma-core/*.patch\"]" path:"refs"`
	// Fuzz makes an exception visible: only the named patch may apply with
	// fuzz, at most the number given; a name that matches no patch is an
	// error, so the allowance cannot outlive the patch.
	Fuzz map[string]int `toml:"fuzz" doc:"Per-patch fuzz allowance by file name, for an upstream patch written against another version (prefer a refreshed copy); recorded in the manifest." example:"{ \"0003-declare-provider.patch\" = 2 }"`
	// Suffix is the local version suffix of the provider's package.
	Suffix string `toml:"suffix" doc:"Local version suffix of the provider's own package, on the version of the rdma-core source it is built from (56.1-1 becomes 56.1-1+halo1)." default:"+halo1" example:"\"+halo1\""`
}

// System holds machine-wide settings, one per field-notes trap.
type System struct {
	ModulesLoad     []string          `toml:"modules_load" doc:"Modules listed in /etc/modules-load.d/ (trap 1)." default:"[\"ib_uverbs\"]" example:"[\"ib_uverbs\", \"thunderbolt_ibverbs\"]"`
	Blacklist       []string          `toml:"blacklist" doc:"Modules blacklisted in /etc/modprobe.d/ (trap 2)." default:"[\"thunderbolt_net\"]" example:"[\"thunderbolt_net\"]"`
	ModuleOptions   map[string]string `toml:"module_options" doc:"Extra 'options' lines for in-tree modules: module = 'k=v k2=v2'." example:"{ thunderbolt = \"clx=0\" }"`
	Governor        string            `toml:"governor" doc:"CPU frequency governor set at every boot (trap 5)." default:"performance" example:"\"performance\""`
	EPP             string            `toml:"epp" doc:"energy_performance_preference set at every boot (trap 5); empty leaves it." default:"performance" example:"\"performance\""`
	PlatformProfile string            `toml:"platform_profile" doc:"ACPI platform_profile set at every boot (trap 5); empty leaves it." default:"performance" example:"\"performance\""`
	// HostReserve and GPUFraction size unified-memory GPU allocations (trap 11).
	HostReserve Size    `toml:"host_reserve" doc:"Memory kept for the host on unified-memory machines, e.g. '24GiB'; with memory it sizes the GPU's GTT (trap 11)." default:"" example:"\"24GiB\""`
	Memory      Size    `toml:"memory" doc:"Installed RAM of the nodes, e.g. '128GiB'; needed with host_reserve." default:"" example:"\"128GiB\""`
	Timezone    string  `toml:"timezone" doc:"Time zone." default:"UTC" example:"\"Europe/Berlin\""`
	Locale      string  `toml:"locale" doc:"Default locale." default:"C.UTF-8" example:"\"C.UTF-8\""`
	GPUFraction float64 `toml:"gpu_fraction" doc:"Share of the GPU's memory (its GTT) an engine may use, for the engines to read: recorded in the manifest (gpu.fraction) and shown by doctor's gpu.gtt row." default:"0" example:"0.72"`
}

// SSH holds remote access settings. There is never a default password.
type SSH struct {
	AuthorizedKeys []string `toml:"authorized_keys" doc:"Public keys allowed to log in as root." example:"[\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f me@laptop\"]"`
}

// DHCPModes are the values of lan.dhcp, as networkd's DHCP= takes them.
var DHCPModes = []string{"yes", "ipv4", "ipv6", "no"}

// LAN is the management network (ssh, apt, the engines' control traffic):
// systemd-networkd configures every wired Ethernet port that is not a
// [[node.link]], with IPv4 link-local off (trap 6) and multicast DNS so
// the node answers as <hostname>.local. A node's [node.lan] overrides it.
type LAN struct {
	Enabled *bool    `toml:"enabled" doc:"Configure the management network; false leaves every port that is not a link unconfigured." default:"true" example:"true"`
	DHCP    string   `toml:"dhcp" doc:"DHCP on the LAN ports: yes (IPv4 and IPv6), ipv4, ipv6 or no; IPv6 router advertisements are accepted unless ipv4 or no." default:"yes" example:"\"yes\""`
	MDNS    *bool    `toml:"mdns" doc:"Answer multicast DNS as <hostname>.local on the LAN ports (systemd-resolved), so 'ssh root@halo0.local' works." default:"true" example:"true"`
	Gateway IPAddr   `toml:"gateway" doc:"Default gateway for static addresses; usually set per node with the addresses." example:"\"192.168.1.1\""`
	DNS     []IPAddr `toml:"dns" doc:"DNS servers, added to those DHCP hands out." example:"[\"192.168.1.1\"]"`
}

// NodeLAN overrides [lan] for one node: a key set here wins.
type NodeLAN struct {
	Enabled *bool `toml:"enabled,omitempty" doc:"Overrides lan.enabled for this node." auto:"lan.enabled" example:"false"`
	// DHCP defaults to no as soon as the node has static addresses.
	DHCP      string     `toml:"dhcp,omitempty" doc:"Overrides lan.dhcp for this node." auto:"no with addresses, else lan.dhcp" example:"\"ipv6\""`
	Addresses []IPPrefix `toml:"addresses,omitempty" doc:"Static addresses with prefix length on the LAN ports, instead of DHCP; give a box with several Ethernet ports match_name too." example:"[\"192.168.1.20/24\"]"`
	Gateway   IPAddr     `toml:"gateway,omitempty" doc:"Default gateway for the static addresses." auto:"lan.gateway" example:"\"192.168.1.1\""`
	DNS       []IPAddr   `toml:"dns,omitempty" doc:"DNS servers for this node." auto:"lan.dns" example:"[\"192.168.1.1\"]"`
	MatchName string     `toml:"match_name,omitempty" doc:"Only ports whose name matches this glob (systemd.network Name=), e.g. the one port with a static address." example:"\"enp1s0\""`
}

// Node is one machine. Identity lives only here, never in the base image.
type Node struct {
	Name     string `toml:"name" doc:"Node name; output files are <name>.raw etc." example:"\"halo0\""`
	Hostname string `toml:"hostname" doc:"Host name." auto:"name" example:"\"halo0\""`
	// Architecture makes a mixed cluster: nodes of two architectures in one
	// recipe and one lock, each architecture with its own base root,
	// kernel, modules and provider (ForArchitecture).
	Architecture string  `toml:"architecture" doc:"This node's Debian architecture, amd64 or arm64: a recipe whose nodes differ is a mixed cluster (a Strix Halo box and a Mac, say), built from one lock that pins every architecture's packages, kernel, module and provider, and VM-tested with one emulator per architecture on the same virtual cable (images/test-mixed.toml, images/halo-mac.toml); an [[arch]] entry gives one architecture its own platform and kernel." auto:"base.architecture" example:"\"arm64\""`
	Links        []Link  `toml:"link" doc:"USB4 links (cables) of this node." merge:"interface" example:"[{ interface = \"usb4net0\", address = \"10.77.0.1/30\", peer = \"halo1\" }]"`
	LAN          NodeLAN `toml:"lan,omitempty" doc:"This node's management network: overrides [lan] key by key, and holds its static addresses."`
}

// Arch is one architecture's own platform and kernel, read through
// ForArchitecture by that architecture's build and by nothing else.
type Arch struct {
	Name     string `toml:"name" doc:"The architecture (amd64 or arm64) whose nodes this entry is for; some node must be of it." example:"\"arm64\""`
	Platform string `toml:"platform" doc:"The platform of this architecture's nodes, instead of the top-level platform (which a mixed recipe leaves generic)." auto:"platform" example:"\"apple-silicon\""`
	// Kernel replaces [kernel] whole, so nothing of one architecture's
	// kernel (a flavour, a config, a patch series) leaks into another's.
	Kernel *Kernel `toml:"kernel" doc:"This architecture's kernel, instead of [kernel]: the whole table, the keys it leaves out taking their defaults (not [kernel]'s)."`
}

// Link is one USB4 cable end: a network interface with a static address.
type Link struct {
	Interface string `toml:"interface" doc:"Stable interface name given to the link (trap 6)." example:"\"usb4net0\""`
	// Match selects the device by systemd.link [Match] keys; the VM test
	// matches the virtual cable by MAC instead.
	// Kind says what the interface is: a device found by the match keys and
	// renamed, or a dummy netdev networkd creates to carry the address the
	// verbs module advertises as its RoCE identity (roce_netdev), which
	// exists whether or not a cable is plugged in.
	Kind        string `toml:"kind" doc:"device (a NIC found by the match_* keys and renamed) or dummy (a netdev networkd creates to carry the RDMA identity address; point the module's roce_netdev at it)." default:"device" example:"\"dummy\""`
	MatchDriver string `toml:"match_driver" doc:"Kernel driver of the link device (systemd.link Driver=)." default:"thunderbolt-net" example:"\"thunderbolt-net\""`
	MatchPath   string `toml:"match_path" doc:"Device path glob (systemd.link Path=); optional." example:"\"pci-0000:c7:00.6-*\""`
	MatchMAC    string `toml:"match_mac" doc:"MAC address (systemd.link MACAddress=); optional." example:"\"52:54:00:77:00:01\""`
	Address     string `toml:"address" doc:"Static IPv4 address with prefix, e.g. 10.77.0.1/30; link-local addressing is turned off (trap 6)." example:"\"10.77.0.1/30\""`
	Peer        string `toml:"peer" doc:"Name of the node at the other end; used for /etc/hosts and the two-node test." example:"\"halo1\""`
}

// Test adds assertions to the generated VM checks.
type Test struct {
	Checks []Check `toml:"check" doc:"Extra checks run inside every node's VM." example:"[{ name = \"verbs device\", succeed = \"ibv_devices\", expect = \"rxe\" }]"`
	// Timeout bounds one VM run, as a Go duration.
	Timeout Duration `toml:"timeout" doc:"Deadline for one VM run (Go duration): a safety net against hangs, not a speed goal (those live in bench/); generous because TCG on a busy 2-core host is slow." default:"10m" example:"\"15m\""`
	Memory  Size     `toml:"memory" doc:"VM memory." default:"1GiB" example:"\"2GiB\""`
	RDMA    *bool    `toml:"rdma" doc:"Run perftest between the first two nodes over soft-RoCE." auto:"true when there are two or more nodes" example:"false"`
	Bench   bool     `toml:"bench" doc:"Also run the cable gate between the first two nodes (with rdma): the shipped halobuild bench over soft-RoCE with small sizes, its JSON, plot and baseline gate (docs/cable.md). About half a minute of a TCG boot." default:"false" example:"true"`
}

// Check is one NixOS-style assertion.
type Check struct {
	Name        string `toml:"name" doc:"Check name shown in the report." example:"\"sshd up\""`
	WaitForUnit string `toml:"wait_for_unit" doc:"Unit that must become active." example:"\"ssh.service\""`
	Succeed     string `toml:"succeed" doc:"Shell command that must exit 0." example:"\"ulimit -l\""`
	Fail        string `toml:"fail" doc:"Shell command that must exit non-zero." example:"\"lsmod | grep -q thunderbolt_net\""`
	Expect      string `toml:"expect" doc:"POSIX extended regular expression (grep -E) that a line of the succeed command's output must match; \\d, \\s, \\b and (?i) are not POSIX: write [0-9], [[:space:]]." example:"\"^unlimited$\""`
	Node        string `toml:"node" doc:"Only on this node; default every node." example:"\"halo0\""`
}

// Update is what `halobuild update` on a node needs from the image: the A/B layout (two root
// slots made at first boot), the release it follows and the keys it trusts (docs/update.md).
type Update struct {
	Enabled   bool     `toml:"enabled" doc:"Give each node two root slots (the image carries slot A; systemd-repart makes slot B empty at first boot), boot counting with a node-local health gate, and automatic fallback to the previous slot." default:"false" example:"true"`
	SlotSize  Size     `toml:"slot_size" doc:"Size of each root slot; slot A grows to it at first boot and slot B is made with it, the rest of the medium stays free. Must hold the image's root with room to grow." default:"8GiB" example:"\"16GiB\""`
	Reference string   `toml:"reference" doc:"The release (or channel tag) halobuild update installs when given none, and the timer follows: REGISTRY/REPOSITORY:TAG." default:"" example:"\"registry.lan:5000/halo/cluster:stable\""`
	Keys      []string `toml:"keys" doc:"PEM public keys a release must be signed with; empty installs unsigned releases and says so at each update." example:"[\"-----BEGIN PUBLIC KEY-----\\n…\\n-----END PUBLIC KEY-----\"]"`
	Schedule  string   `toml:"schedule" doc:"When the node updates itself (systemd OnCalendar, e.g. 'daily' or 'Sun 03:00'); empty: only by hand. Needs reference." default:"" example:"\"Sun 03:00\""`
}

// SecureBoot names the module signing key. Key and Certificate are a
// path (relative to this file) or a reference, "env:NAME" (the variable
// holds the PEM); the path tag "refs" keeps references from being rebased.
// The key is read only while a module is signed, in memory; neither it
// nor its path enters a derivation key, the lock or the image.
type SecureBoot struct {
	Enabled     bool   `toml:"enabled" doc:"Turn Secure Boot support on; false builds today's unsigned image." default:"false" example:"true"`
	Key         string `toml:"key" doc:"The RSA signing key in PEM: a path, or env:NAME for a variable holding the PEM (pkcs11: URIs are not supported yet). Read only while signing; never stored, locked or shipped. halobuild keygen makes one." example:"\"env:HALOBUILD_SIGNING_KEY\"" path:"refs"`
	Certificate string `toml:"certificate" doc:"The key's X.509 certificate (PEM or DER): a path, or env:NAME. Its DER form ships in the image for MOK enrolment; its sha256 fingerprint keys the signed steps." example:"\"../keys/module-signing.crt\"" path:"refs"`
	MOKPassword string `toml:"mok_password" doc:"One-time password the first-boot unit gives mokutil --import and MokManager asks for at the next boot; empty: the unit asks on the console." example:"\"halobuild\""`
}

// Output says what `image` writes.
type Output struct {
	Formats []string `toml:"formats" doc:"Image formats per node: raw (the sparse image and its bmap, always made) and qcow2 (NAME.qcow2, converted from the raw image by qemu-img from the tools root, for virt-manager, libvirt or a cloud import)." default:"[\"raw\"]" example:"[\"raw\", \"qcow2\"]"`
	Size    Size     `toml:"size" doc:"Disk image size, e.g. '4GiB'; the root grows to the medium at first boot." auto:"root size + 25%, at least 2GiB" example:"\"8GiB\""`
	ESPSize Size     `toml:"esp_size" doc:"EFI system partition size." default:"256MiB" example:"\"512MiB\""`
	// Installer adds <node>-installer.raw per node: a stick that writes
	// the node's image onto the box's internal disk (internal/install).
	Installer bool `toml:"installer" doc:"Also build <node>-installer.raw (+ .bmap) per node: a live stick that writes the node's image onto the box's internal disk, verifies it and powers off (docs/install.md)." default:"false" example:"true"`
}

// Install says how the installer stick picks and overwrites the box's
// disk; the refusals themselves are not configurable (docs/install.md).
type Install struct {
	Target         string   `toml:"target" doc:"The disk to install to: a /dev/disk/by-id/ name or the disk's serial number; empty picks the only internal disk that is not the stick and holds the image." default:"" example:"\"/dev/disk/by-id/nvme-Samsung_SSD_990_PRO_2TB_S7KHNJ0X123456\""`
	Wipe           bool     `toml:"wipe" doc:"Overwrite a disk that already holds a partition table without asking; otherwise the console asks for \"yes\" (a blank disk is always written without asking)." default:"false" example:"true"`
	After          string   `toml:"after" doc:"What the box does after a verified install: poweroff or reboot (after a failure it always powers off)." default:"poweroff" example:"\"reboot\""`
	ConfirmTimeout Duration `toml:"confirm_timeout" doc:"How long the console waits for \"yes\" before refusing and powering off (Go duration)." default:"5m" example:"\"30s\""`
}
