#!/usr/bin/env python3
"""Compares k25's embeddings with llama.cpp's llama-embedding on the same model and prompts.

For each prompt: the largest absolute difference between the two unit vectors and their cosine
similarity. Needs a built k25-run and a llama.cpp build (only run by hand; never in the tests).

  scripts/embedding-agreement.py -m ../shared/models/stories260K.gguf \
      --peer /work/peer/llama.cpp/build/bin -p "Once upon a time" -p "Lily"

--cpp prints llama.cpp's vectors as C++ initialisers (how tests/unit/embedding_reference.h
was made).
"""
import argparse
import json
import math
import os
import subprocess
import sys


def peer_vectors(args):
    env = dict(os.environ, LD_LIBRARY_PATH=args.peer)
    cmd = [os.path.join(args.peer, "llama-embedding"), "-m", args.model, "-p", "\n".join(args.prompt),
           "--pooling", args.pooling, "--embd-normalize", "2", "--embd-output-format", "json",
           "-t", "1", "-ctk", args.kv, "-ctv", args.kv]
    # llama-embedding prints through its asynchronous logger, whose thread may still be writing
    # when main() returns: on a loaded machine the JSON comes out cut short. Run it again then.
    for _ in range(20):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        try:
            return [d["embedding"] for d in json.loads(out)["data"]]
        except json.JSONDecodeError:
            continue
    sys.exit("llama-embedding never printed whole JSON")


def k25_vectors(args):
    cmd = [args.k25_run, "embed", "-m", args.model, "--pooling", args.pooling, "-t", "1",
           "--kv-cache-dtype", args.kv]
    for p in args.prompt:
        cmd += ["-p", p]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [d["embedding"] for d in json.loads(out)["data"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--prompt", action="append", required=True)
    ap.add_argument("--pooling", default="mean", choices=["mean", "cls", "last"])
    ap.add_argument("--kv", default="f32", choices=["f32", "f16"], help="KV cache type of both")
    ap.add_argument("--peer", default="/work/peer/llama.cpp/build/bin")
    ap.add_argument("--k25-run", default="build/bin/k25-run")
    ap.add_argument("--cpp", action="store_true", help="print llama.cpp's vectors as C++")
    args = ap.parse_args()
    peer = peer_vectors(args)
    if args.cpp:
        for p, v in zip(args.prompt, peer):
            print("    {%s, {%s}}," % (json.dumps(p), ", ".join("%.7ff" % x for x in v)))
        return 0
    ours = k25_vectors(args)
    worst = 0.0
    for p, a, b in zip(args.prompt, ours, peer):
        diff = max(abs(x - y) for x, y in zip(a, b))
        cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
        worst = max(worst, diff)
        print("%-60s dim %d  max|diff| %.2e  cosine %.9f" % (json.dumps(p)[:60], len(a), diff, cos))
    print("max |diff| over all prompts: %.2e" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
