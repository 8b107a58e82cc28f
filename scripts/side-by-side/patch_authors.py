#!/usr/bin/env python3
"""The Skyformer authors' src/ (a copy, never their checkout) made to run on a CPU, and set short.

    patch_authors.py SRC_COPY --steps N --warmup W --eval-every E --eval-batches B --max-len L

Each change to main.py replaces one line that must occur exactly once (else it stops, naming it:
their code is not the 1a677cb this was written against). config.py keeps every line; the short
run's settings are appended to it, so its own values stay readable above them. README.md lists
the changes and why; the script writes their diff to OUT_DIR/authors-changes.diff.
"""
import argparse
import os
import sys

# main.py: what cannot run without a GPU. Nothing else in it changes.
MAIN_EDITS = [
    # a device to move to: theirs is always CUDA
    ("from models.dataset_LRA import LRADataset\n",
     "from models.dataset_LRA import LRADataset\n"
     "DEVICE = \"cuda\" if torch.cuda.is_available() else \"cpu\"  # side-by-side: the CPU without a GPU\n"),
    # step_LRA: each batch to the device (was .cuda())
    ("        batch[key] = batch[key].cuda()\n",
     "        batch[key] = batch[key].to(DEVICE)  # side-by-side: was .cuda()\n"),
    # main: the model to the device (was .cuda())
    ("    model = model.cuda()\n",
     "    model = model.to(DEVICE)  # side-by-side: was .cuda()\n"),
    # train_LRA's last line: CUDA's memory statistics are empty without a GPU (a KeyError, before the test)
    ("    print(\"peak memory usage (MB): {}\".format(torch.cuda.memory_stats()['active_bytes.all.peak']>>20))\n",
     "    if DEVICE == \"cuda\": print(\"peak memory usage (MB): {}\".format(torch.cuda.memory_stats()['active_bytes.all.peak']>>20))  # side-by-side: CUDA only\n"),
]

CONFIG_TAIL = """
# side-by-side (attnlab's scripts/side-by-side): a short run of the ListOps settings above
import torch as _torch
listops["model"]["device"] = "cuda" if _torch.cuda.is_available() else "cpu"  # read by attention_skyformer.py (default "cuda")
listops["model"]["max_seq_len"] = {max_len}  # main.py rounds it up to a power of two, as the pickles are padded
listops["training"]["num_train_steps"] = {steps}
listops["training"]["warmup"] = {warmup}  # their 1000 of 50000 steps, scaled: OneCycleLR's pct_start = warmup / steps
listops["training"]["eval_frequency"] = {eval_every}
listops["training"]["num_eval_steps"] = {eval_batches}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    for name in ("--steps", "--warmup", "--eval-every", "--eval-batches", "--max-len"):
        parser.add_argument(name, type=int, required=True)
    args = parser.parse_args()

    path = os.path.join(args.src, "main.py")
    with open(path) as f:
        text = f.read()
    for old, new in MAIN_EDITS:
        if text.count(old) != 1:
            sys.exit(f"patch_authors: {path}: {old.strip()!r} occurs {text.count(old)} times, not once")
        text = text.replace(old, new)
    with open(path, "w") as f:
        f.write(text)

    path = os.path.join(args.src, "config.py")
    with open(path) as f:
        text = f.read()
    if "\nlistops = {" not in text:
        sys.exit(f"patch_authors: {path} defines no `listops` settings")
    with open(path, "a") as f:
        f.write(CONFIG_TAIL.format(max_len=args.max_len, steps=args.steps, warmup=args.warmup,
                                   eval_every=args.eval_every, eval_batches=args.eval_batches))


if __name__ == "__main__":
    main()
