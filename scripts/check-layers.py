#!/usr/bin/env python3
"""The include graph's layers, checked: no file includes one above it. scripts/test.sh runs it.

Rooms (the top folders) include only those they stand on: core nothing, store nothing (it never
sees LibTorch), train core, a plugin or dataset folder core, runner core, train and store. Inside
train/ and runner/ each file has a layer (LAYERS below, lowest first) and includes only files of
its layer or lower. A command (cmd_*.cpp, an executable's main) is the top of every layer: it may
include anything, since nothing includes it.

Prints one line per upward include, FILE:LINE: includes TARGET (layer above), and exits 1; prints
nothing and exits 0 when there is none. `--graph` prints each folder's arrows instead.
"""
import os
import re
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')

# What each room may include besides itself.
ROOMS = {
    "core": set(),
    "store": set(),
    "train": {"core"},
    "plugins": {"core"},
    "datasets": {"core"},
    "runner": {"core", "train", "store"},
}

# Inside a room, by folder (runner/) or by file stem (train/): lowest first; one line, one layer.
LAYERS = {
    "runner": [
        ["base"],
        ["cli", "results"],
        ["plugin_host", "serve"],
        ["experiment"],
        ["studies"],
        ["queue"],
        ["slurm"],
    ],
    "train": [
        ["config", "measurements", "loss_scaler", "safetensors"],
        ["optimizer", "schedule", "data_loader", "model", "dropout", "linear", "variance", "attention_draws"],
        ["job", "step_runner"],
        ["checkpoint_file", "resume", "instability", "weights"],
        ["trainer"],
    ],
}

COMMAND = re.compile(r"(^|/)(cmd_[a-z_]+|main|serve_main|exec_serve)\.cpp$")
SOURCES = (".cpp", ".hpp", ".h", ".cc")


def include_roots(path):
    """Where a quoted include of `path` is looked for, in order (the build's include folders)."""
    return [os.path.dirname(path), os.path.join(ROOT, "core/include"), os.path.join(ROOT, "train/include"),
            os.path.join(ROOT, "store/include"), os.path.join(ROOT, "runner")]


def resolve(path, name):
    for root in include_roots(path):
        candidate = os.path.normpath(os.path.join(root, name))
        if os.path.isfile(candidate):
            return candidate
    return None  # a generated or system header: not ours to place


def room_of(path):
    return os.path.relpath(path, ROOT).split(os.sep)[0]


def layer_of(path):
    """(room, layer index) or (room, None) where the room has no layers or the file none."""
    room = room_of(path)
    if room not in LAYERS:
        return room, None
    rel = os.path.relpath(path, os.path.join(ROOT, room)).split(os.sep)
    key = rel[0] if room == "runner" else os.path.splitext(rel[-1])[0]
    for index, names in enumerate(LAYERS[room]):
        if key in names:
            return room, index
    return room, None


def files():
    for room in ROOMS:
        for folder, dirs, names in os.walk(os.path.join(ROOT, room)):
            dirs[:] = [d for d in dirs if d not in ("templates", "web", "screenshots")]
            for name in sorted(names):
                if name.endswith(SOURCES):
                    yield os.path.join(folder, name)


def upward(path, target):
    """Why `path` may not include `target`, or None."""
    room, to_room = room_of(path), room_of(target)
    if to_room != room:
        return None if to_room in ROOMS[room] else "room " + to_room + " is not below " + room
    if COMMAND.search(path):
        return None
    (_, mine), (_, theirs) = layer_of(path), layer_of(target)
    if mine is None or theirs is None or theirs <= mine:
        return None
    return "layer above"


def main():
    graph = "--graph" in sys.argv[1:]
    arrows, problems = Counter(), []
    for path in files():
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                target = resolve(path, m.group(1)) if m else None
                if not target:
                    continue
                rel, to = os.path.relpath(path, ROOT), os.path.relpath(target, ROOT)
                arrows[(os.path.dirname(rel), os.path.dirname(to))] += 1
                why = upward(path, target)
                if why:
                    problems.append(f"{rel}:{number}: includes {to} ({why})")
    if graph:
        for (a, b), n in sorted(arrows.items()):
            if a != b:
                print(f"{a} -> {b}: {n}")
        return 0
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
