#!/usr/bin/env python3
"""ListOps TSV files as the Skyformer authors' training reads them: their pickles.

    listops_to_pickle.py TSV_DIR OUT_DIR [--max-len 256]

Reads TSV_DIR/basic_{train,val,test}.tsv (LRA's format: a `Source<TAB>Target` header, then one
row a line) and writes OUT_DIR/lra-listops.{train,dev,test}.pickle, the files and records their
src/preprocess/create_listops.py writes and src/models/dataset_LRA.py reads: a pickled list, one
dict a row, {"input_ids_0": numpy int32 array, "label": numpy int32}.

Their tokens (LRA's input pipeline before 2021-03-04, which their create_listops.py runs): the
Source split on runs of non-word characters (tfds' Tokenizer), so `(`, `)` and `]` are dropped
and `[MAX` is read as `MAX`. Cut to --max-len tokens, padded with 0 to --max-len, then padded with
0 again to the next power of two (their 2,000 + 48 = 2,048; 256 stays 256).

The ids are attnlab's fixed ListOps ids (datasets/listops/README.md): digit d is d + 1, MIN 11,
MAX 12, MED 13, SM 14, 0 padding. Theirs were numbered in Python set order, a random permutation
of these, so the two runs here see the same integers (check_inputs.py holds them to it).
"""
import argparse
import os
import pickle
import re
import sys

import numpy as np

IDS = {str(d): d + 1 for d in range(10)}
IDS.update({"MIN": 11, "MAX": 12, "MED": 13, "SM": 14})
NON_WORD = re.compile(r"[^A-Za-z0-9_]+")  # tfds' Tokenizer: \W+ on ASCII text
SPLITS = (("train", "train"), ("val", "dev"), ("test", "test"))  # LRA's file, their pickle


def tokens(source, where):
    ids = []
    for word in NON_WORD.split(source):
        if not word:
            continue
        if word not in IDS:
            sys.exit(f"{where}: unknown token {word!r}")
        ids.append(IDS[word])
    return ids


def read_split(path, max_len, padded_len):
    rows = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        header = f.readline().rstrip("\r\n")
        if header != "Source\tTarget":
            sys.exit(f"{path}:1: header is {header!r}, not 'Source<TAB>Target'")
        for number, line in enumerate(f, start=2):
            line = line.rstrip("\r\n")
            if not line:
                continue
            source, sep, target = line.partition("\t")
            if not sep or not target.isdigit():
                sys.exit(f"{path}:{number}: not a Source<TAB>Target row")
            ids = tokens(source, f"{path}:{number}")[:max_len]
            row = np.zeros(padded_len, dtype=np.int32)
            row[: len(ids)] = ids
            rows.append({"input_ids_0": row, "label": np.int32(int(target))})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tsv_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--max-len", type=int, default=256, help="tokens kept (their max_length)")
    args = parser.parse_args()
    padded_len = 1 << (args.max_len - 1).bit_length()  # their max_seq_len rounding in main.py
    os.makedirs(args.out_dir, exist_ok=True)
    for lra_name, their_name in SPLITS:
        rows = read_split(os.path.join(args.tsv_dir, f"basic_{lra_name}.tsv"), args.max_len, padded_len)
        out = os.path.join(args.out_dir, f"lra-listops.{their_name}.pickle")
        with open(out, "wb") as f:
            pickle.dump(rows, f)
        lengths = [int((r["input_ids_0"] != 0).sum()) for r in rows]
        print(f"{out}: {len(rows)} rows of {padded_len} ids, tokens {min(lengths)}..{max(lengths)}"
              f" (mean {sum(lengths) / len(lengths):.1f})")


if __name__ == "__main__":
    main()
