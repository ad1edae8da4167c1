#!/usr/bin/env bash
# Writes the seed corpora in fuzz/corpus/ (checked in; rerun after changing an input format).
# Control messages are encoded from protobuf text format by protoc, the rest with printf.
# Usage: fuzz/make_seeds.sh   (from anywhere; needs protoc, which the build needs anyway)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=$root/fuzz/corpus
mkdir -p "$corpus"/{control_message,data_plane_stream,mesh_hello,config_text,round_message}

encode() {  # encode <message type> <text>: serialized bytes on stdout
  printf '%s' "$2" | protoc --proto_path="$root" --encode="kolo.wire.$1" "$root/proto/kolo.proto"
}
record() {  # record <rank> <file>: [rank][2-byte big-endian length][bytes]
  local n
  n=$(stat -c %s "$2")
  printf "\\x$(printf %02x "$1")\\x$(printf %02x $((n >> 8)))\\x$(printf %02x $((n & 255)))"
  cat "$2"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
encode WorkerMessage 'hello { rank: 1 size: 2 host: "h1" data_address: "10.0.0.2:4000" worker_nonce: "0123456789abcdef0123456789abcdef" }' >"$tmp/hello"
encode WorkerMessage 'requests { requests { full { name: "grad/w1" op: 0 dtype: 6 shape: [2, 3] device: -1 reduce_op: 0 root: -1 prescale: 1 postscale: 1 } } requests { full { name: "grad/b1" op: 0 dtype: 6 shape: [3] device: -1 reduce_op: 1 root: -1 prescale: 1 postscale: 0.5 } } }' >"$tmp/allreduce"
encode WorkerMessage 'requests { requests { full { name: "g" op: 1 dtype: 2 shape: [4, 2] device: -1 root: -1 prescale: 1 postscale: 1 } } requests { full { name: "b" op: 2 dtype: 0 shape: [16] device: -1 root: 1 prescale: 1 postscale: 1 } } }' >"$tmp/gather_bcast"
encode WorkerMessage 'requests { requests { full { name: "a2a" op: 3 dtype: 7 shape: [4, 3] device: -1 root: -1 splits: [1, 3] prescale: 1 postscale: 1 } } requests { full { name: "rs" op: 4 dtype: 4 shape: [5] device: -1 reduce_op: 3 root: -1 prescale: 1 postscale: 1 } } }' >"$tmp/a2a_rs"
encode WorkerMessage 'requests { requests { full { name: "x" op: 0 dtype: 3 shape: [7] device: -1 root: -1 group: "grp" group_size: 2 prescale: 1 postscale: 1 } } requests { full { name: "y" op: 0 dtype: 3 shape: [1] device: -1 root: -1 group: "grp" group_size: 2 prescale: 1 postscale: 1 } } }' >"$tmp/grouped"
encode WorkerMessage 'requests { requests { cache_id: 1 } requests { cache_id: 2 } }' >"$tmp/cached"
encode WorkerMessage 'requests { requests { full { name: "bar" op: 5 dtype: 0 device: -1 root: -1 prescale: 1 postscale: 1 } } }' >"$tmp/barrier"
encode WorkerMessage 'shutdown { }' >"$tmp/shutdown"
encode WorkerMessage 'abort { reason: "rank 1: out of memory" }' >"$tmp/abort"
encode WorkerMessage 'ping { client_unix_us: 1700000000000000 }' >"$tmp/ping"

# To the controller (byte 0 even), size 2, cache capacity 4.
{ printf '\x00\x01\x04'; record 0 "$tmp/hello"; record 1 "$tmp/hello"; } >"$corpus/control_message/hello"
{ printf '\x00\x01\x04'; record 0 "$tmp/allreduce"; record 1 "$tmp/allreduce"
  record 0 "$tmp/cached"; record 1 "$tmp/cached"; } >"$corpus/control_message/allreduce_then_cached"
{ printf '\x00\x01\x04'; record 0 "$tmp/gather_bcast"; record 1 "$tmp/gather_bcast"
  record 0 "$tmp/a2a_rs"; record 1 "$tmp/a2a_rs"; } >"$corpus/control_message/other_ops"
{ printf '\x00\x01\x04'; record 0 "$tmp/grouped"; record 1 "$tmp/grouped"
  record 0 "$tmp/barrier"; record 1 "$tmp/barrier"; } >"$corpus/control_message/grouped_barrier"
{ printf '\x00\x01\x04'; record 0 "$tmp/allreduce"; record 1 "$tmp/shutdown"; record 0 "$tmp/abort"
  record 1 "$tmp/ping"; } >"$corpus/control_message/shutdown_abort_ping"

encode ControllerMessage 'welcome { peers { rank: 0 host: "h0" data_address: "10.0.0.1:4000" } peers { rank: 1 host: "h1" data_address: "10.0.0.2:4000" } }' >"$tmp/welcome"
encode ControllerMessage 'responses { responses { seq: 1 op: 0 dtype: 6 prescale: 1 postscale: 1 root: -1 names: ["a", "b"] cache_ids: [1, 2] num_elements: [6, 3] } responses { seq: 2 op: 1 dtype: 2 prescale: 1 postscale: 1 root: -1 names: "g" cache_ids: 3 num_elements: 8 first_dims: [4, 1] } responses { seq: 3 op: 0 names: "bad" cache_ids: 0 num_elements: 0 error: "Mismatched allreduce shapes" error_code: 9 } }' >"$tmp/responses"
encode ControllerMessage 'pong { client_unix_us: 1 server_unix_us: 2 }' >"$tmp/pong"
encode ControllerMessage 'abort { reason: "rank 2 lost" }' >"$tmp/cabort"
{ printf '\x01\x00\x00'; record 0 "$tmp/welcome"; record 0 "$tmp/responses"; record 0 "$tmp/pong"
  record 0 "$tmp/cabort"; } >"$corpus/control_message/to_worker"

# Data plane: 16 header bytes (collective, dtype, op, ranks-1, rank, sizes...), a piece plan
# (count-1, sizes), then the received stream.
stream=$(printf 'kolo-data-%04d' $(seq 1 40) | head -c 600)
{ printf '\x00\x06\x00\x03\x01\x00\x10\x40\x00\x00\x00\x00\x00\x00\x00\x00\x02\x07\x00\x40'; printf '%s' "$stream"; } >"$corpus/data_plane_stream/allreduce_f32_sum"
{ printf '\x00\x04\x03\x01\x00\x00\x09\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03'; printf '%s' "$stream"; } >"$corpus/data_plane_stream/allreduce_f16_max"
{ printf '\x01\x02\x01\x02\x02\x07\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x11\x05'; printf '%s' "$stream"; } >"$corpus/data_plane_stream/reducescatter_i32"
{ printf '\x02\x00\x00\x03\x02\x00\x10\x00\x20\x00\x00\x00\x30\x00\x00\x00\x00\x0d'; printf '%s' "$stream"; } >"$corpus/data_plane_stream/allgather"
{ printf '\x03\x00\x00\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x03'; printf '%s' "$stream"; } >"$corpus/data_plane_stream/broadcast"
{ printf '\x04\x00\x00\x03\x01\x00\x10\x00\x20\x00\x08\x00\x30\x00\x05\x00\x00\x09'; printf '%s' "$stream"; } >"$corpus/data_plane_stream/alltoall"

# Mesh handshake frames: piece plan (count, sizes), then the stream.
frame() {  # frame <kind> <rank> <size> <payload bytes>: header, then that many payload bytes
  printf 'KLOM\x00\x00\x00\x02'
  printf "\\x00\\x00\\x00\\x$(printf %02x "$1")"
  printf "\\x00\\x00\\x00\\x$(printf %02x "$2")\\x00\\x00\\x00\\x$(printf %02x "$3")"
  printf "\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x$(printf %02x "$4")"
  head -c "$4" /dev/zero | tr '\0' 'n'
}
{ printf '\x00'; frame 1 1 4 32; printf 'the Accept follows'; } >"$corpus/mesh_hello/dial"
{ printf '\x03\x01\x03\x07'; frame 2 2 4 64; } >"$corpus/mesh_hello/accept_in_pieces"
{ printf '\x01\x05'; frame 3 0 2 32; printf 'data stream'; } >"$corpus/mesh_hello/proof"
{ printf '\x00KLOM\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x02\x80\x00\x00\x00\x00\x00\x00\x00'; } >"$corpus/mesh_hello/length_2_pow_63"
{ printf '\x00KLOM\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x10'; } >"$corpus/mesh_hello/old_protocol"
{ printf '\x00GET / HTTP/1.1\r\n\r\n'; } >"$corpus/mesh_hello/http"

# Round messages: piece-plan byte(s), then "KLOR", round, received_seq, fusion threshold
# (64-bit), flags, ready count, diverted count (32-bit), then the ids; all big-endian.
round() {  # round <round> <seq> <flags> <ready ids...> -- <diverted ids...>
  printf 'KLOR'
  printf "\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x$(printf %02x "$1")"
  printf "\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x$(printf %02x "$2")"
  printf '\x00\x00\x00\x00\x04\x00\x00\x00'
  printf "\\x00\\x00\\x00\\x$(printf %02x "$3")"
  shift 3
  local ready=() diverted=() into=ready
  for id in "$@"; do
    if [ "$id" = -- ]; then into=diverted; continue; fi
    if [ $into = ready ]; then ready+=("$id"); else diverted+=("$id"); fi
  done
  printf "\\x00\\x00\\x00\\x$(printf %02x ${#ready[@]})\\x00\\x00\\x00\\x$(printf %02x ${#diverted[@]})"
  for id in "${ready[@]}" "${diverted[@]}"; do printf "\\x00\\x00\\x00\\x$(printf %02x "$id")"; done
}
{ printf '\x00'; round 1 3 0 1 2 5 --; round 1 3 0 1 5 -- 2; round 2 4 1 7 --; } >"$corpus/round_message/three_rounds"
{ printf '\x03\x05\x01\x09'; round 1 0 2 --; round 1 9 0 4 --; } >"$corpus/round_message/stopping_in_pieces"
{ printf '\x00KLOR\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff\xff\xff\x00\x00\x00\x00'; } >"$corpus/round_message/huge_count"
{ printf '\x00'; round 3 1 0 2 2 --; } >"$corpus/round_message/duplicate_ids"

# Config text: mode byte (0 options, 1 byte size, 2 SLURM node list), then the text.
printf '\x00KOLO_RANK=1\nKOLO_SIZE=4\nKOLO_CONTROLLER=127.0.0.1:29500\nKOLO_FUSION_THRESHOLD=64M\nKOLO_CYCLE_TIME_MS=3.5\nKOLO_TIMEOUT_SECONDS=30\n' >"$corpus/config_text/kolo_vars"
printf '\x00HOROVOD_FUSION_THRESHOLD=1G\nHOROVOD_CYCLE_TIME=1\nHOROVOD_TIMELINE=/tmp/t.json\nHOROVOD_STALL_CHECK_TIME_SECONDS=60\nHOROVOD_LOG_LEVEL=debug\n' >"$corpus/config_text/horovod_aliases"
printf '\x00RANK=3\nWORLD_SIZE=8\nLOCAL_RANK=3\nLOCAL_WORLD_SIZE=4\nMASTER_ADDR=node1\nMASTER_PORT=29500\n' >"$corpus/config_text/torchrun"
printf '\x00OMPI_COMM_WORLD_RANK=1\nOMPI_COMM_WORLD_SIZE=2\nOMPI_COMM_WORLD_LOCAL_RANK=1\nOMPI_COMM_WORLD_LOCAL_SIZE=2\nMASTER_ADDR=n0\nMASTER_PORT=1234\n' >"$corpus/config_text/openmpi"
printf '\x00SLURM_PROCID=5\nSLURM_NTASKS=8\nSLURM_LOCALID=1\nSLURM_JOB_ID=4242\nSLURM_STEP_NODELIST=gpu[01-04]\nSLURM_NODEID=2\n' >"$corpus/config_text/slurm"
printf '\x00@3=7\n@12=1K\n@0=2\nKOLO_TYPO=1\n' >"$corpus/config_text/indexed_names"
printf '\x0164M' >"$corpus/config_text/bytes_64m"
printf '\x01999999999999999G' >"$corpus/config_text/bytes_overflow"
printf '\x01 4096' >"$corpus/config_text/bytes_space"
printf '\x02node[1-4,7],gpu[08-10]x,login' >"$corpus/config_text/nodelist"
printf '\x02r[1-2]n[3-4]' >"$corpus/config_text/nodelist_groups"
printf '\x02a[1-3' >"$corpus/config_text/nodelist_unclosed"
echo "make_seeds: wrote $(find "$corpus" -type f | wc -l) seeds under $corpus"
