#!/usr/bin/env python3
"""Do the authors' pickles and attnlab hold the same integers? Row by row, every split.

    check_inputs.py PICKLE_DIR CACHE_DIR TSV_DIR

PICKLE_DIR holds lra-listops.{train,dev,test}.pickle (listops_to_pickle.py). CACHE_DIR is the
`--cache-dir` an `attnlab data` run of the side-by-side's experiment filled: its tokens/ folder
holds attnlab's token cache, one file a split (core/src/token_cache.cpp: a header, the key, then
tokens [N, inputs, L], lengths int64 [N, inputs], labels int64 [N], each at a multiple of 64
bytes). The files read are the ones whose key names TSV_DIR's basic_<split>.tsv. Both keep the
file's row order (their LRADataset shuffles only when it loads).

Prints one line a split and exits 0 when ids, padding and labels agree everywhere; else names
the first row that differs and exits 1.
"""
import glob
import os
import pickle
import struct
import sys

import numpy as np

MAGIC = b"ATTNTOK\0"
HEADER = struct.Struct("<8sIIqqqQQ")  # magic, version, dtype, n, inputs, max_len, key bytes, checksum
DTYPES = {1: np.uint8, 2: np.int16, 3: np.int32, 4: np.int64}
SPLITS = (("train", "train"), ("val", "dev"), ("test", "test"))


def aligned(offset):
    return (offset + 63) // 64 * 64


def read_cache(path):
    with open(path, "rb") as f:
        blob = f.read()
    magic, version, dtype, n, inputs, max_len, key_bytes, _ = HEADER.unpack_from(blob)
    if magic != MAGIC or version != 2 or dtype not in DTYPES:
        sys.exit(f"{path}: not an attnlab token cache of version 2 (format changed? read core/src/token_cache.cpp)")
    key = blob[HEADER.size:HEADER.size + key_bytes].decode()
    element = np.dtype(DTYPES[dtype])
    at_tokens = aligned(HEADER.size + key_bytes)
    at_lengths = aligned(at_tokens + n * inputs * max_len * element.itemsize)
    at_labels = aligned(at_lengths + n * inputs * 8)
    tokens = np.frombuffer(blob, DTYPES[dtype], n * inputs * max_len, at_tokens).reshape(n, inputs, max_len)
    labels = np.frombuffer(blob, np.int64, n, at_labels)
    return key, tokens[:, 0, :].astype(np.int64), labels


def names(key, tsv):
    """Whether a cache key's sources ("<path>\t<size>\t<mtime>" lines) name this file."""
    return any(os.path.realpath(line.split("\t")[0]) == tsv for line in key.split("\n")[3:] if "\t" in line)


def main():
    pickle_dir, cache_dir, tsv_dir = sys.argv[1:4]
    caches = [read_cache(p) for p in sorted(glob.glob(os.path.join(cache_dir, "tokens", "listops-*.tok")))]
    failed = False
    for lra_name, their_name in SPLITS:
        tsv = os.path.realpath(os.path.join(tsv_dir, f"basic_{lra_name}.tsv"))
        found = [c for c in caches if c[0].split("\n")[1] == lra_name and names(c[0], tsv)]
        if len(found) != 1:
            sys.exit(f"check_inputs: {len(found)} token caches of {tsv} in {cache_dir}/tokens (want 1: run `attnlab data` first)")
        _, ours, our_labels = found[0]
        with open(os.path.join(pickle_dir, f"lra-listops.{their_name}.pickle"), "rb") as f:
            rows = pickle.load(f)
        theirs = np.stack([r["input_ids_0"] for r in rows]).astype(np.int64)
        their_labels = np.array([int(r["label"]) for r in rows], dtype=np.int64)
        problem = None
        if theirs.shape != ours.shape:
            problem = f"shapes differ: theirs {theirs.shape}, attnlab's {ours.shape}"
        else:
            bad = np.nonzero((theirs != ours).any(axis=1) | (their_labels != our_labels))[0]
            if len(bad):
                i = bad[0]
                problem = (f"{len(bad)} rows differ, first row {i}: theirs {theirs[i][:12].tolist()}... label "
                           f"{their_labels[i]}, attnlab's {ours[i][:12].tolist()}... label {our_labels[i]}")
        if problem:
            failed = True
            print(f"{their_name}: {problem}")
        else:
            print(f"{their_name}: {len(rows)} rows x {theirs.shape[1]} ids and labels identical "
                  f"(ids {sorted(set(np.unique(theirs).tolist()) - {0})}, 0 padding)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
