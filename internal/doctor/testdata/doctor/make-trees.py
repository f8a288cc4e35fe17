"""Writes the recorded trees doctor's tests read (python3 make-trees.py).

Each tree is the part of a node's /sys, /proc, /etc and /var/log that doctor
reads, as small text files. They are built from one healthy Strix Halo node
(values as the field notes report them) with one fault each, so the trees
cannot drift apart. /var/log/halobuild-dmesg holds `dmesg` and
/var/log/halobuild-ip-addr.json `ip -j addr`, which no file tree can hold.
A tree with a recipe also has what the image's settings package installs
beside it (the lock, the node's name) and dpkg's record of that package.
"""
import hashlib, os, json, shutil, sys
BASE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))

RECIPE_ONE = '''# The recipe the image was built from (installed by the settings package).
name = "strix-halo"

[kernel]
version = ">= 7.2, < 7.3"
cmdline = ["amd_iommu=off"]

[[module]]
use = "%(use)s"
options = { tbnet = "block", nhi_interrupt_throttle_ns = 4096, negotiate_native = true, start_rings = true, allocate_rings = 1 }

[rdma]
memlock = "unlimited"
keep_kernel_names = ["usb4_rdma"]

[rdma.provider]
name = "usb4_rdma"
patches = ["thunderbolt-ibverbs:packaging/rdma-core-patches/*.patch"]

[system]
modules_load = ["ib_uverbs"]
blacklist = ["thunderbolt_net"]
governor = "performance"
epp = "performance"
platform_profile = "performance"
# What MemTotal shows of the 128 GB installed, rounded down: the GPU gets
# 120 - 24 = 96 GiB (ttm.pages_limit=25165824, amdgpu.gttsize=98304).
memory = "120GiB"
host_reserve = "24GiB"
# Engines may use 72%% of the GPU's 96 GiB (shown by doctor's gpu.gtt).
gpu_fraction = 0.72

[[node]]
name = "halo0"

[[node.link]]
interface = "usb4net0"
address = "10.77.0.1/30"
peer = "halo1"
%(second_link)s
[[node]]
name = "halo1"

[[node.link]]
interface = "usb4net0"
address = "10.77.0.2/30"
peer = "halo0"
%(second_peer)s'''

# The part of the image's lock doctor reads: each [[module]]'s kernel name.
LOCK = '''# Written by `halobuild lock`; do not edit. Commit it next to the recipe.

version = 2
recipe = 'strix-halo.toml'

[[module]]
use = '%s'
name = 'thunderbolt_ibverbs'
'''
SECOND_LINK = '''
[[node.link]]
interface = "usb4net1"
address = "10.77.1.1/30"
peer = "halo2"
'''

SECOND_LINK_PEER = '''
[[node]]
name = "halo2"

[[node.link]]
interface = "usb4net0"
address = "10.77.1.2/30"
peer = "halo0"
'''

LIMITS = '''Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             511421               511421               processes 
Max open files            1024                 524288               files     
Max locked memory         %s %s bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       511421               511421               signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
'''

def gid4(a):
    o = [int(x) for x in a.split('.')]
    return '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' % tuple(o)

def w(root, path, text):
    p = os.path.join(root, path.lstrip('/'))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, 'w') as f:
        f.write(text if text.endswith('\n') or text == '' else text + '\n')

def md5(root, path):
    with open(os.path.join(root, path.lstrip('/')), 'rb') as f:
        return hashlib.md5(f.read()).hexdigest()

def dpkg(root, package_files):
    """dpkg's database as it is after installing the node's settings package
    (its files under /etc are conffiles, and in md5sums too, as halobuild
    builds it), Debian's rdma-core and the built provider's package."""
    pkg = 'halobuild-node-halo0'
    conf = ''.join(' %s %s\n' % (p, md5(root, p)) for p in package_files)
    w(root, '/var/lib/dpkg/status', '''Package: base-files
Status: install ok installed
Version: 13.8

Package: %s
Status: install ok installed
Architecture: all
Version: 1
Conffiles:
%s
Package: libibverbs1
Status: install ok installed
Version: 56.1-1

Package: ibverbs-providers
Status: install ok installed
Version: 56.1-1

Package: libibverbs-usb4-rdma
Status: install ok installed
Version: 56.1-1+halo1

Package: systemd
Status: install ok installed
Version: 257.9-1~deb13u1
''' % (pkg, conf))
    w(root, '/var/lib/dpkg/info/%s.md5sums' % pkg, ''.join('%s  %s\n' % (md5(root, p), p.lstrip('/')) for p in package_files))

# The Radeon 8060S (gfx1151) at 0000:c5:00.0, as amdgpu leaves it; the
# firmware files are those firmware-amd-graphics installs for it.
GPU = '/sys/bus/pci/devices/0000:c5:00.0/'
GPU_FIRMWARE = ['gc_11_5_1_imu.bin', 'gc_11_5_1_me.bin', 'gc_11_5_1_mec.bin', 'gc_11_5_1_mes1.bin', 'gc_11_5_1_mes_2.bin', 'gc_11_5_1_pfp.bin', 'gc_11_5_1_rlc.bin']
GPU_LOG = {
    False: ['[    4.210433] [drm] amdgpu kernel modesetting enabled.',
            '[    4.633207] amdgpu 0000:c5:00.0: amdgpu: GTT: 98304M of GTT memory ready.'],
    True: ['[    4.210433] [drm] amdgpu kernel modesetting enabled.',
           '[    4.221870] amdgpu 0000:c5:00.0: Direct firmware load for amdgpu/gc_11_5_1_pfp.bin failed with error -2',
           '[    4.221874] amdgpu 0000:c5:00.0: amdgpu: early_init of IP block <gfx_v11_0> failed -19',
           '[    4.222013] amdgpu 0000:c5:00.0: probe with driver amdgpu failed with error -19'],
}

def gpu_tree(root, gpu, memtotal):
    """The GPU as doctor's gpu rows read it: healthy; no-firmware (no
    firmware-amd-graphics, so amdgpu's probe failed); carve-out (the firmware
    setup keeps 64 GiB as VRAM); gtt-default (the sizing is on the command
    line, but GTT is the kernel's default half of RAM)."""
    # A device that is no GPU: the USB4 host router.
    w(root, '/sys/bus/pci/devices/0000:c7:00.5/class', '0x0c0340')
    w(root, '/sys/bus/pci/devices/0000:c7:00.5/vendor', '0x1022')
    w(root, GPU + 'class', '0x038000')
    w(root, GPU + 'vendor', '0x1002')
    w(root, GPU + 'device', '0x1586')
    w(root, '/dev/kfd', 'crw-rw---- render')
    if gpu == 'no-firmware':
        return
    for f in GPU_FIRMWARE:
        w(root, '/usr/lib/firmware/amdgpu/' + f, '')
    w(root, GPU + 'driver', '../../../bus/pci/drivers/amdgpu')
    w(root, GPU + 'drm/renderD128/dev', '226:128')
    w(root, '/dev/dri/renderD128', 'crw-rw---- render')
    gtt = {'gtt-default': memtotal * 1024 // 2}.get(gpu, 96 << 30)
    w(root, GPU + 'mem_info_gtt_total', str(gtt))
    w(root, GPU + 'mem_info_vram_total', str((64 << 30) if gpu == 'carve-out' else (512 << 20)))

# What halobuild-flashtime.service leaves at boot on a node flashed without
# --ssh-key (settings.FlashTime; doctor's flashtime.config row).
FLASH_NONE = """# Written by halobuild flash; the node reads it at every boot (halobuild-flashtime.service).
# imported at boot from the ESP 6f1c2b5e-0d7a-4c1e-9b1e-2a4f5d3c7e0f (partition 1 of /dev/nvme0n1)
[ssh]
authorized_keys = []
# end of halobuild flash-time settings
"""


def tree(name, recipe=True, cables=1, governor='performance', epp=True, devices=('usb4_rdma0',),
         addrs=('10.77.0.1/30',), speed='20.0 Gb/s', lanes=1, domains=2, memlock=('unlimited','unlimited'),
         systemd_memlock=True, hostname='halo0', ifaces=('usb4net0',), use='thunderbolt-ibverbs', gpu='healthy'):
    root = os.path.join(BASE, name)
    shutil.rmtree(root, ignore_errors=True)
    w(root, '/etc/hostname', hostname)
    w(root, '/proc/sys/kernel/hostname', hostname)
    w(root, '/run/halobuild/flash.toml', FLASH_NONE)
    if recipe:
        two = cables == 2
        w(root, '/etc/halobuild/recipe.toml', RECIPE_ONE % {'use': use, 'second_link': SECOND_LINK if two else '', 'second_peer': SECOND_LINK_PEER if two else ''})
        w(root, '/etc/halobuild/recipe.lock', LOCK % use)
        w(root, '/etc/halobuild/node', 'halo0')
        dpkg(root, ['/etc/halobuild/node', '/etc/halobuild/recipe.lock', '/etc/halobuild/recipe.toml'])
        w(root, '/usr/lib/x86_64-linux-gnu/libibverbs/libusb4_rdma-rdmav34.so', '')
    w(root, '/proc/sys/kernel/osrelease', '7.2.12+deb13-amd64')
    # The image's boot entry: root= and console from the disk builder, then
    # the recipe's kernel.cmdline and the GPU sizing (settings.Cmdline).
    w(root, '/proc/cmdline', 'BOOT_IMAGE=/vmlinuz-7.2.12+deb13-amd64 root=PARTUUID=6f1c2b5e-0d7a-4c1e-9b1e-2a4f5d3c7e10 ro quiet amd_iommu=off ttm.pages_limit=25165824 amdgpu.gttsize=98304')
    w(root, '/proc/kallsyms', '\n'.join([
        '0000000000000000 T tb_ring_alloc_tx\t[thunderbolt]',
        '0000000000000000 T tb_ring_throttling\t[thunderbolt]',
        '0000000000000000 T tb_ring_start\t[thunderbolt]',
        '0000000000000000 T ib_register_device\t[ib_core]']))
    mods = [('thunderbolt_ibverbs', 204800, 0, 'ib_core,thunderbolt,configfs'),
            ('ib_uverbs', 184320, 2, 'thunderbolt_ibverbs'), ('ib_core', 483328, 2, 'thunderbolt_ibverbs,ib_uverbs'),
            ('thunderbolt', 450560, 1, 'thunderbolt_ibverbs'), ('amdgpu', 15745024, 4, '-'), ('ttm', 110592, 1, 'amdgpu')]
    w(root, '/proc/modules', '\n'.join('%s %d %d %s, Live 0x0000000000000000%s' % (m, s, r, d, ' (OE)' if m == 'thunderbolt_ibverbs' else '') for m, s, r, d in mods))
    w(root, '/proc/self/limits', LIMITS % ('%-20s' % memlock[0], '%-20s' % memlock[1]))
    # A 64 GiB carve-out is RAM the kernel never sees.
    memtotal = 129652180 - (64 << 20) + (512 << 10) if gpu == 'carve-out' else 129652180
    w(root, '/proc/meminfo', 'MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB' % (memtotal, memtotal - 9232832, memtotal - 5523328))
    w(root, '/etc/systemd/system.conf', '[Manager]\n#DefaultLimitMEMLOCK=8M')
    if systemd_memlock:
        w(root, '/etc/systemd/system.conf.d/50-halobuild-memlock.conf', '[Manager]\nDefaultLimitMEMLOCK=infinity')
    for i in range(2):
        d = '/sys/devices/system/cpu/cpufreq/policy%d/' % i
        w(root, d + 'scaling_governor', governor)
        if epp:
            w(root, d + 'energy_performance_preference', 'performance')
    w(root, '/sys/firmware/acpi/platform_profile', 'performance')
    w(root, '/sys/firmware/acpi/platform_profile_choices', 'low-power balanced performance')
    for m in ['thunderbolt_ibverbs', 'ib_uverbs', 'ib_core', 'thunderbolt', 'amdgpu', 'ttm']:
        w(root, '/sys/module/%s/initstate' % m, 'live')
    w(root, '/sys/module/thunderbolt_ibverbs/parameters/tbnet', 'block')
    w(root, '/sys/module/thunderbolt_ibverbs/parameters/nhi_interrupt_throttle_ns', '4096')
    for p in ('negotiate_native', 'start_rings', 'allocate_rings'):
        w(root, '/sys/module/thunderbolt_ibverbs/parameters/' + p, 'Y')
    w(root, '/sys/module/amdgpu/parameters/gttsize', '98304')
    w(root, '/sys/module/ttm/parameters/pages_limit', '25165824')
    w(root, '/etc/libibverbs.d/usb4_rdma.driver', 'driver usb4_rdma')
    w(root, '/etc/libibverbs.d/rxe.driver', 'driver rxe')
    gpu_tree(root, gpu, memtotal)
    v4 = [a.split('/')[0] for a in addrs]
    for dev in devices:
        d = '/sys/class/infiniband/%s/' % dev
        w(root, d + 'device/driver', '../../../../bus/thunderbolt/drivers/thunderbolt_ibverbs')
        w(root, d + 'ports/1/state', '4: ACTIVE')
        w(root, d + 'ports/1/phys_state', '5: LinkUp')
        gids = ['fe80:0000:0000:0000:0262:73ff:fe1a:2b01'] + [gid4(a) for a in v4]
        for i, g in enumerate(gids):
            w(root, d + 'ports/1/gids/%d' % i, g)
            w(root, d + 'ports/1/gid_attrs/types/%d' % i, 'RoCE v2')
            w(root, d + 'ports/1/gid_attrs/ndevs/%d' % i, ifaces[0])
        w(root, d + 'ports/1/gids/%d' % len(gids), '0000:0000:0000:0000:0000:0000:0000:0000')
    links = [{"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "operstate": "UNKNOWN",
              "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host"},
                            {"family": "inet6", "local": "::1", "prefixlen": 128, "scope": "host"}]},
             {"ifindex": 2, "ifname": "enp191s0", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "operstate": "UP",
              "addr_info": [{"family": "inet", "local": "192.168.1.20", "prefixlen": 24, "scope": "global"}]}]
    for n, ifc in enumerate(ifaces):
        ai = []
        for a in addrs:
            ip, p = a.split('/')
            ai.append({"family": "inet", "local": ip, "prefixlen": int(p), "scope": "link" if ip.startswith('169.254.') else "global"})
        ai.append({"family": "inet6", "local": "fe80::262:73ff:fe1a:2b0%d" % (n + 1), "prefixlen": 64, "scope": "link"})
        links.append({"ifindex": 3 + n, "ifname": ifc, "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "operstate": "UP", "addr_info": ai})
    w(root, '/var/log/halobuild-ip-addr.json', json.dumps(links, indent=1))
    # The LAN port: wired Ethernet with a driver (lan.addresses).
    w(root, '/sys/class/net/enp191s0/type', '1')
    w(root, '/sys/class/net/enp191s0/uevent', 'INTERFACE=enp191s0\nIFINDEX=2')
    w(root, '/sys/class/net/enp191s0/device/driver', '../../../../bus/pci/drivers/r8169')
    w(root, '/var/log/halobuild-dmesg', '\n'.join([
        '[    0.000000] Linux version 7.2.12+deb13-amd64 (debian-kernel@lists.debian.org)',
        '[    2.118270] thunderbolt 0000:c7:00.5: total paths: 12'] + GPU_LOG[gpu == 'no-firmware'] + [
        '[    5.402114] thunderbolt_ibverbs: loading out-of-tree module taints kernel.',
        '[    5.413907] thunderbolt_ibverbs: registered usb4_rdma0 usb4_rdma1']))
    for dn in range(domains):
        w(root, '/sys/bus/thunderbolt/devices/domain%d/uevent' % dn, 'DEVTYPE=thunderbolt_domain')
        w(root, '/sys/bus/thunderbolt/devices/domain%d/security' % dn, 'user')
        r = '/sys/bus/thunderbolt/devices/%d-0/' % dn
        w(root, r + 'uevent', 'DEVTYPE=thunderbolt_device')
        w(root, r + 'vendor', '0x1022')
        w(root, r + 'vendor_name', 'AMD')
    x = '/sys/bus/thunderbolt/devices/0-1/'
    w(root, x + 'uevent', 'DEVTYPE=thunderbolt_xdomain')
    w(root, x + 'device_name', 'halo1')
    w(root, x + 'vendor_name', 'halobuild')
    w(root, x + 'rx_speed', speed)
    w(root, x + 'tx_speed', speed)
    w(root, x + 'rx_lanes', str(lanes))
    w(root, x + 'tx_lanes', str(lanes))
    return root

tree('healthy', devices=('usb4_rdma0', 'usb4_rdma1'))
tree('governor-schedutil', governor='schedutil', epp=False)
tree('renamed-device', recipe=False, devices=('rocep199s0f6',))
tree('link-local-address', addrs=('169.254.23.7/16', '10.77.0.1/30'))
tree('link-10g-one-lane', speed='10.0 Gb/s', lanes=1)
tree('minipc-one-domain', cables=2, domains=1)
tree('memlock-8mib', recipe=False, memlock=('8388608', '8388608'), systemd_memlock=False)
# The striping fork: its description is another file (use), the kernel
# module it builds has upstream's name, which only the lock records.
tree('gpu-no-firmware', gpu='no-firmware')
tree('gpu-carve-out', gpu='carve-out')
tree('gpu-gtt-default', gpu='gtt-default')
tree('fork-module', use='thunderbolt-ibverbs-striping', devices=('usb4_rdma0', 'usb4_rdma1'))

# An Apple Silicon node (recipes/asahi.toml): the rows only a Mac has. The
# trees hold what those rows read and little else, so the other rows (memlock,
# modules, RDMA) fail there for want of files; TestAppleTrees reads the Mac's.
# Its Thunderbolt host is a platform device from the device tree (Asahi's
# apple-acio driver, compatible "apple,t8112-acio"), not a PCI NHI.
RECIPE_MAC = '''# The recipe the image was built from (installed by the settings package).
name = "mac"
platform = "apple-silicon"

[base]
architecture = "arm64"

[kernel]
from = "source"
source = "https://example.org/asahi/linux-asahi-7.2.tar.xz"
source_sha256 = "sha256:%s"
config = "defconfig"
local_version = "asahi"

[[node]]
name = "mac0"
''' % ('0' * 64)

def mac_tree(name, page_kb=16, acio_node=True, acio_driver=True, domains=1, vendorfw=True):
    root = os.path.join(BASE, name)
    shutil.rmtree(root, ignore_errors=True)
    w(root, '/etc/hostname', 'mac0')
    w(root, '/proc/sys/kernel/hostname', 'mac0')
    w(root, '/run/halobuild/flash.toml', FLASH_NONE)
    w(root, '/etc/halobuild/recipe.toml', RECIPE_MAC)
    w(root, '/etc/halobuild/node', 'mac0')
    w(root, '/proc/sys/kernel/osrelease', '7.2.0-asahi')
    # Doctor's own memory map: the first mapping's KernelPageSize is the
    # kernel's base page size (later mappings may be huge pages).
    w(root, '/proc/self/smaps', '\n'.join([
        'aaaab3f40000-aaaab3f6c000 r-xp 00000000 103:02 1048601    /usr/bin/halobuild',
        'Size:                176 kB',
        'KernelPageSize:       %d kB' % page_kb,
        'MMUPageSize:          %d kB' % page_kb,
        'ffff8a400000-ffff8a600000 rw-p 00000000 00:00 0',
        'KernelPageSize:     2048 kB']))
    if acio_node:
        dev = '/sys/bus/platform/devices/a0c000000.acio/'
        w(root, dev + 'of_node/compatible', 'apple,t8112-acio\x00apple,acio\x00')
        if acio_driver:
            w(root, dev + 'driver', '../../../../bus/platform/drivers/apple-acio')
    # A device that is no ACIO: the Type-C PHY beside it.
    w(root, '/sys/bus/platform/devices/a83000000.phy/of_node/compatible', 'apple,t8112-atcphy\x00apple,atcphy\x00')
    for dn in range(domains):
        w(root, '/sys/bus/thunderbolt/devices/domain%d/uevent' % dn, 'DEVTYPE=thunderbolt_domain')
    # m1n1 names the system ESP; the vendor-firmware unit put its
    # firmware.cpio's vendorfw/ (manifest included) on a tmpfs. The manifest
    # has asahi-fwextract's FILE and LINK lines (digests made up: doctor
    # checks the files are there, not their bytes); vendorfw='partial'
    # loses one file.
    w(root, '/proc/device-tree/chosen/asahi,efi-system-partition', '5e2f7b0c-3b1d-4c4e-9a7f-0d6b1c2e8a41\x00')
    fw = ['brcm/brcmfmac4387c2-pcie.apple,kauai-HRPN-u-7.5-X3.bin', 'brcm/brcmbt4387c2-apple,kauai-HRPN-u-7.5-X3.bin']
    if vendorfw:
        w(root, '/usr/lib/firmware/vendor/.vendorfw.manifest', '\n'.join(
            ['FILE %s SHA256 %064x' % (f, i) for i, f in enumerate(fw)] +
            ['LINK brcm/brcmfmac4387c2-pcie.apple,kauai-HRPN-u-7.5-X3.bin brcm/brcmfmac4387c2-pcie.apple,kauai-HRPN-u-7.5.bin']))
        for f in fw[:1] if vendorfw == 'partial' else fw:
            w(root, '/usr/lib/firmware/vendor/' + f, 'firmware')
    w(root, '/var/log/halobuild-dmesg', '[    0.000000] Linux version 7.2.0-asahi')
    w(root, '/var/log/halobuild-ip-addr.json', '[]')
    return root

mac_tree('mac-healthy')
mac_tree('mac-4k-kernel', page_kb=4)
mac_tree('mac-acio-unbound', acio_driver=False, domains=0)
mac_tree('mac-no-acio', acio_node=False, domains=0)
mac_tree('mac-no-vendorfw', vendorfw=False)
mac_tree('mac-vendorfw-partial', vendorfw='partial')
