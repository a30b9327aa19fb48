#!/usr/bin/env bash
# two-nodes.sh: the L2 tier's quickstart on one machine, start to finish.
#
# It starts a Redis Cluster of 3 masters and 3 replicas on loopback
# (ports PORT..PORT+5, default 7000; each server bounded by maxmemory with
# allkeys-lru, as kvalloc expects of L2), two kvallocd daemons that stand
# for two nodes over that cluster, and the twonodes example, which writes
# on node A and reads on node B. Everything lives in one temporary
# directory and is stopped on exit, whatever the exit.
#
# Usage: client/example/twonodes/two-nodes.sh   (from the repository root; make two-nodes)
# Needs: go, redis-server and redis-cli (make redis installs them).
set -euo pipefail

port=${PORT:-7000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/kvalloc-two-nodes.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for i in 0 1 2 3 4 5; do redis-cli -p $((port + i)) shutdown nosave >/dev/null 2>&1 || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

for tool in redis-server redis-cli go; do
  command -v $tool >/dev/null || { echo "two-nodes: $tool is missing (make redis installs redis-server and redis-cli)" >&2; exit 3; }
done

# 1. A local Redis Cluster: six servers, then one command that makes them a cluster.
for i in 0 1 2 3 4 5; do
  p=$((port + i)); mkdir -p "$dir/redis-$p"
  (cd "$dir/redis-$p" && redis-server --port $p --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file nodes.conf --cluster-require-full-coverage no --save '' --appendonly no \
    --maxmemory 256mb --maxmemory-policy allkeys-lru --daemonize yes --logfile redis.log)
done
for i in 0 1 2 3 4 5; do
  until redis-cli -p $((port + i)) ping >/dev/null 2>&1; do sleep 0.1; done
done
redis-cli --cluster create $(for i in 0 1 2 3 4 5; do printf '127.0.0.1:%d ' $((port + i)); done) \
  --cluster-replicas 1 --cluster-yes >"$dir/cluster-create.log"
until redis-cli -p "$port" cluster info | grep -q cluster_state:ok; do sleep 0.1; done
echo "two-nodes: a Redis Cluster of 3 masters and 3 replicas on 127.0.0.1:$port-$((port + 5))"

# 2. Two daemons, node A and node B, each with its own socket and pool, over that cluster.
go build -o "$dir/kvallocd" ./cmd/kvallocd
l2=redis://127.0.0.1:$port,127.0.0.1:$((port + 1)),127.0.0.1:$((port + 2))
# The MAC secret the nodes share (docs/OPERATING.md, "The L2's threat model").
(umask 077 && head -c 32 /dev/urandom | base64 >"$dir/l2-secret")
for node in a b; do
  "$dir/kvallocd" -socket "$dir/node-$node.sock" -pool-size 256MiB -l2 "$l2" -l2-secret-file "$dir/l2-secret" 2>"$dir/node-$node.log" &
  pids+=($!)
done
for node in a b; do
  for _ in $(seq 100); do [ -S "$dir/node-$node.sock" ] && break; sleep 0.1; done
  [ -S "$dir/node-$node.sock" ] || { cat "$dir/node-$node.log" >&2; echo "two-nodes: node $node did not start" >&2; exit 1; }
done
echo "two-nodes: node A on $dir/node-a.sock, node B on $dir/node-b.sock, both with -l2 $l2"

# 3. An engine on node A stores a prompt's chunks; one on node B finds them in L2 and reads them.
go run ./client/example/twonodes -a "$dir/node-a.sock" -b "$dir/node-b.sock" "$@"
