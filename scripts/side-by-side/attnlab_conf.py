#!/usr/bin/env python3
"""attnlab's side of the side-by-side: an experiment file made from a paper's conf file.

    attnlab_conf.py CONF OUT.toml --dataset listops --methods softmax,skyformer --path TSV_DIR
                    --steps N --eval-every E --eval-batches B --max-len L [--seed S]

Copies from CONF (e.g. conf/skyformer-lra.toml) [model], [train] with the dataset's own train
keys ([datasets.DATASET.train]) folded in, [datasets.DATASET] and each named [methods.NAME]
(its per-dataset tables for DATASET only), and changes only what a short CPU run must:

- steps N, and warmup scaled with it (the conf's warmup x N / the conf's steps, at least 2:
  OneCycleLR's pct_start = warmup / steps stays the paper's);
- eval_every E, log_every E (attnlab's training loss is then the mean since the last
  evaluation, as the authors' printed one), eval_batches B;
- precision "fp32": on a CPU the authors' torch.cuda.amp.autocast and GradScaler switch
  themselves off, so their run is fp32 too;
- variance_passes 0: no extra passes over the test split after training (a stochastic method's
  variance metrics, which the authors' loop does not compute);
- the dataset read from TSV_DIR (source "files", path), max_len L;
- seeds [S].

Prints each change, one a line, so the log says what differs from CONF.
"""
import argparse
import sys
import tomllib


def value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    sys.exit(f"attnlab_conf: cannot write {v!r}")


def table(out, name, keys):
    """[name] with its scalar keys, then its sub-tables as [name.sub]."""
    out.append(f"[{name}]")
    out.extend(f"{k} = {value(v)}" for k, v in keys.items() if not isinstance(v, dict))
    for k, v in keys.items():
        if isinstance(v, dict):
            table(out, f"{name}.{k}", v)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("conf")
    parser.add_argument("out")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--methods", required=True, help="comma-separated attnlab method names")
    parser.add_argument("--path", required=True)
    for name in ("--steps", "--eval-every", "--eval-batches", "--max-len"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    with open(args.conf, "rb") as f:
        conf = tomllib.load(f)
    if args.dataset not in conf.get("datasets", {}):
        sys.exit(f"attnlab_conf: {args.conf} has no [datasets.{args.dataset}]")
    dataset = dict(conf["datasets"][args.dataset])
    train = dict(conf.get("train", {}))
    train.update(dataset.pop("train", {}))
    conf_steps = train.get("steps") or sys.exit(f"attnlab_conf: {args.conf} sets no [train] steps")
    warmup = max(2, round(train.get("warmup", 100) * args.steps / conf_steps))

    changes = {
        ("train", "steps"): args.steps,
        ("train", "warmup"): warmup,
        ("train", "eval_every"): args.eval_every,
        ("train", "log_every"): args.eval_every,
        ("train", "eval_batches"): args.eval_batches,
        ("train", "precision"): "fp32",
        ("train", "variance_passes"): 0,
        ("datasets." + args.dataset, "source"): "files",
        ("datasets." + args.dataset, "path"): args.path,
        ("datasets." + args.dataset, "max_len"): args.max_len,
    }
    tables = {"train": train, "datasets." + args.dataset: dataset}
    for (name, key), new in changes.items():
        old = tables[name].get(key, "(unset)")
        if old != new:
            print(f"  [{name}] {key}: {old} -> {new}")
        tables[name][key] = new

    out = [f"# Made by scripts/side-by-side/attnlab_conf.py from {args.conf}: its [model], [train],",
           f"# [datasets.{args.dataset}] and methods {args.methods}, set short (the changes are in the",
           "# script's log). Do not edit: the script writes it again.",
           "[experiment]",
           f'name = "side-by-side-{args.dataset}"',
           f"seeds = [{args.seed}]", ""]
    table(out, "model", conf.get("model", {}))
    out.append("")
    table(out, "train", train)
    out.append("")
    table(out, "datasets." + args.dataset, dataset)
    for method in args.methods.split(","):
        if method not in conf.get("methods", {}):
            sys.exit(f"attnlab_conf: {args.conf} has no [methods.{method}]")
        keys = dict(conf["methods"][method])
        per_dataset = keys.pop("datasets", {})
        if args.dataset in per_dataset:
            keys["datasets"] = {args.dataset: per_dataset[args.dataset]}
        out.append("")
        table(out, "methods." + method, keys)
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
