#!/usr/bin/env bash
# Downloads a small public GGUF model (needs a network; none is reachable in this project's CI).
# Usage: scripts/get-model.sh [DEST_DIR]   (default: models/)
set -euo pipefail
dest=${1:-models}
url=${K25_MODEL_URL:-https://huggingface.co/QuantFactory/SmolLM-135M-GGUF/resolve/main/SmolLM-135M.Q8_0.gguf}
mkdir -p "$dest"
out="$dest/$(basename "$url")"
if [ -s "$out" ]; then
  echo "already present: $out"
  exit 0
fi
echo "downloading $url"
if ! curl -fL --retry 3 --connect-timeout 10 -o "$out.part" "$url"; then
  rm -f "$out.part"
  echo "download failed (no network?). Point k25 at any local GGUF: make run MODEL=/path/to/model.gguf" >&2
  exit 1
fi
mv "$out.part" "$out"
echo "saved $out; start it with: make run MODEL=$out"
