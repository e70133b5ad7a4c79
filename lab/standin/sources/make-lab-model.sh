#!/usr/bin/env bash
# Lab model (TEST FIXTURE for molecule/image): a Hugging Face-style snapshot of a few files whose entries are
# symlinks into a blob store, as `hf download` leaves them in a cache, so the model role must materialise
# real files. One shard (48 MiB) is large enough that a transfer and a hash take measurable time.
# Usage: make-lab-model.sh ROOT REVISION  (writes ROOT/blobs and ROOT/snapshots/REVISION; no-op when present)
set -euo pipefail
root=$1 rev=$2 snap=$1/snapshots/$2
[ -e "$root/.complete-$rev" ] && exit 0
rm -rf "$root" && mkdir -p "$root/blobs" "$snap/engram"
blob() {  # blob <relative path in the snapshot> <MiB or 0 for text> [text]
  local tmp=$root/blobs/tmp
  if [ "$2" = 0 ]; then printf '%s\n' "$3" >"$tmp"; else head -c "$(( $2 * 1048576 ))" /dev/urandom >"$tmp"; fi
  local sum; sum=$(sha256sum "$tmp" | cut -d' ' -f1)
  mv "$tmp" "$root/blobs/$sum"
  ln -s "$(realpath --relative-to="$(dirname "$snap/$1")" "$root/blobs/$sum")" "$snap/$1"
}
blob config.json 0 '{"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "lab": true}'
blob model.safetensors.index.json 0 '{"metadata": {"total_size": 41943040}, "weight_map": {}}'
blob model-00001-of-00002.safetensors 8
blob model-00002-of-00002.safetensors 48
blob engram/table-layer01.bin 4
touch "$root/.complete-$rev"
