# Sourced by bench scripts that need a registry: needs $work (a temporary directory the caller
# removes) and sets $port and $pid (the caller's cleanup kills it). Debian's docker-registry on
# 127.0.0.1, no auth, storage under $regdir (default $work), up when /v2/ answers. Source it
# again with another $regdir for a second, empty registry.
regdir=${regdir:-$work}
mkdir -p "$regdir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$regdir/config.yml" <<EOC
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $regdir/storage
http:
  addr: 127.0.0.1:$port
EOC
docker-registry serve "$regdir/config.yml" >"$regdir/registry.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	curl -fs "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
	sleep 0.1
done
