"""Minimal safetensors reader/writer (NumPy only): reads float32, writes
float32, bfloat16 or float16 (the values must already be representable: the
writer checks it rather than rounding)."""
import json
import struct

import numpy as np


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (path, name, e["dtype"])
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"]).copy()
    return out


def round_bf16(x):
    """x rounded to bfloat16's nearest-even values (no NaNs), as float64."""
    u = np.ascontiguousarray(x, dtype="<f4").view("<u4").astype(np.uint64)
    top = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    return (top << 16).view("<f4").astype(np.float64)


def _encode(arr, dtype):
    if dtype == "F32":
        return np.ascontiguousarray(arr, dtype="<f4")
    if dtype == "F16":
        out = np.ascontiguousarray(arr, dtype="<f2")
    elif dtype == "BF16":
        out = (np.ascontiguousarray(arr, dtype="<f4").view("<u4") >> 16).astype("<u2")
        widened = (out.astype(np.uint32) << 16).view("<f4")
        assert np.array_equal(widened, np.asarray(arr, dtype=np.float32)), "values not bf16-representable"
        return out
    else:
        raise ValueError(dtype)
    assert np.array_equal(out.astype(np.float64), np.asarray(arr, dtype=np.float64)), "values not representable"
    return out


def save(path, tensors, dtype="F32", prefix=""):
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        arr = _encode(arr, dtype)
        header[prefix + name] = {"dtype": dtype, "shape": list(arr.shape),
                                 "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        blobs.append(arr.tobytes())
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
