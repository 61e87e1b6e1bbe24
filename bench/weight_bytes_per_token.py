#!/usr/bin/env python3
"""Bytes of weights one decode token reads from a GGUF file: every tensor except the token
embedding (one row is looked up; it counts when it is also the output matrix), with the expert
tensors (*_exps) of a mixture-of-experts model counted at expert_used_count / expert_count.
Prints one integer. Used by bench/run.sh for decode GB/s."""
import struct
import sys

# Bytes per block and elements per block of the GGML types k25 reads.
SIZES = {0: (4, 1), 1: (2, 1), 30: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32),
         8: (34, 32), 10: (84, 256), 11: (110, 256), 12: (144, 256), 13: (176, 256),
         14: (210, 256), 20: (18, 32), 23: (136, 256)}
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
          12: "d"}


def main(path):
    with open(path, "rb") as f:
        data = f.read(64 << 20)  # metadata and tensor infos come first
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string():
        n = take("Q")
        nonlocal pos
        s = data[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            inner, n = take("I"), take("Q")
            return [value(inner) for _ in range(n)]
        return take(SCALAR[t])

    if data[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    pos = 4
    _version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    arch = meta.get("general.architecture", "")
    used = meta.get(f"{arch}.expert_used_count", 0)
    count = meta.get(f"{arch}.expert_count", 0)
    tensors = {}
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        ggml_type = take("I")
        take("Q")  # offset
        elements = 1
        for d in dims:
            elements *= d
        block_bytes, block = SIZES.get(ggml_type, (0, 1))
        tensors[name] = elements // block * block_bytes
    total = 0
    for name, size in tensors.items():
        if name == "token_embd.weight" and "output.weight" in tensors:
            continue
        if "_exps." in name and count:
            size = size * used // count
        total += size
    print(total)


if __name__ == "__main__":
    main(sys.argv[1])
