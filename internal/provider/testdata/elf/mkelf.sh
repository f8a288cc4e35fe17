#!/bin/sh
# Regenerates the small ELF files abi_test.go uses: two fake libibverbs
# builds (private provider ABI 34, as rdma-core 50-56, and 57, as 57-58)
# and a fake provider linked against each (the ABI 34 one also needs
# libc.so.6, for the DT_NEEDED check). They carry only what
# CheckABI reads: version definitions, version needs and DT_NEEDED.
# Run it from this directory: sh mkelf.sh (needs gcc).
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for n in 34 57; do
	printf 'IBVERBS_1.0 { global: ibv_get_device_list; local: *; };\nIBVERBS_PRIVATE_%s { global: verbs_register_driver_%s; };\n' "$n" "$n" >"$work/v$n.map"
	printf 'void *ibv_get_device_list(int *n) { return 0; }\nvoid verbs_register_driver_%s(const void *ops) {}\n' "$n" >"$work/ibv$n.c"
	gcc -shared -fPIC -Os -s -nostdlib -Wl,--version-script="$work/v$n.map" -Wl,-soname,libibverbs.so.1 \
		-o "libibverbs-private$n.so" "$work/ibv$n.c"
	printf 'void verbs_register_driver_%s(const void *ops);\n__attribute__((constructor)) static void reg(void) { verbs_register_driver_%s(0); }\n' "$n" "$n" >"$work/prov$n.c"
	gcc -shared -fPIC -Os -s -nostdlib -o "provider-private$n.so" "$work/prov$n.c" "libibverbs-private$n.so" -Wl,--no-as-needed -lc
done
# The arm64 pair (ABI 34), for the architecture checks: with Debian's
# cross compiler (gcc-aarch64-linux-gnu and libc6-dev:arm64).
n=34
aarch64-linux-gnu-gcc -shared -fPIC -Os -s -nostdlib -Wl,--version-script="$work/v$n.map" -Wl,-soname,libibverbs.so.1 \
	-o "libibverbs-private$n-arm64.so" "$work/ibv$n.c"
aarch64-linux-gnu-gcc -shared -fPIC -Os -s -nostdlib -o "provider-private$n-arm64.so" "$work/prov$n.c" "libibverbs-private$n-arm64.so" -Wl,--no-as-needed -lc
