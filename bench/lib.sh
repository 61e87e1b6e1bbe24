# Shared by the bench/*.sh scripts (sourced).

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_ready() {  # url pid
  for _ in $(seq 1 600); do
    if curl -sf "$1/health" > /dev/null 2>&1; then return 0; fi
    kill -0 "$2" 2> /dev/null || { echo "server exited" >&2; return 1; }
    sleep 0.2
  done
  echo "server not ready" >&2
  return 1
}

bench_model() {  # bin out dtype: prints the ~125M benchmark model's path, made when missing
  mkdir -p "$2"
  local model="$2/llama-125m-$3.gguf"
  [[ -f "$model" ]] || "$1/k25-mkmodel" --shape llama-125m --dtype "$3" -o "$model" >&2
  echo "$model"
}
