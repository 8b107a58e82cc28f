#!/usr/bin/env python3
"""The side-by-side's tables: the authors' run and attnlab's, one table a method.

    compare.py ATTNLAB_DB [--their-seed 42] METHOD=THEIR_LOG [METHOD=THEIR_LOG ...]

THEIR_LOG is the log the Skyformer authors' src/main.py writes (log-<seed>/<task>/train.<name>.log):
at every evaluation, print_summary prints the training window's summary, then the validation's,
as dicts {'t': seconds, 'loss': mean, 'accu': mean, 'best_accu': ..., 'component': 'train' |
'dev' | 'test'}. 't' is the sum of the window's step times (batch fetch, forward, backward,
update), so their steps/s there is steps in the window / 't'. 'loss' is the mean training loss
over the window; the dev 'accu' the mean accuracy of its validation batches; 'test' comes once,
at the end, from the weights their rule kept ("best model saved: step = ...").

attnlab's numbers come from its SQLite database (store/src/schema_v1.hpp): curves(run_id, step,
split, name, value, wall_seconds) and results(run_id, name, value). With log_every = eval_every
its train loss at step s is the mean over the steps since the last evaluation, as theirs. Its
steps/s in a window is the steps over the wall time from the previous validation's end to this
training point; over the run, results' steps_per_second (validation left out, as theirs).
"""
import argparse
import ast
import re
import sqlite3
import sys

SUMMARY = re.compile(r"\{[^{}]*'component': '(?:train|dev|test)'\}")
NUMPY_SCALAR = re.compile(r"np\.\w+\(([^()]*)\)")  # numpy >= 2 prints np.float64(0.25)
SAVED = re.compile(r"best model saved: step =\s+(\d+) dev accu =\s+([0-9.]+)")


def their_run(path):
    with open(path, errors="replace") as f:
        text = f.read()
    summaries = [ast.literal_eval(NUMPY_SCALAR.sub(r"\1", m.group(0))) for m in SUMMARY.finditer(text)]
    train = [s for s in summaries if s["component"] == "train"]
    dev = [s for s in summaries if s["component"] == "dev"]
    test = [s for s in summaries if s["component"] == "test"]
    saved = SAVED.findall(text)
    return {
        "train": train, "dev": dev,
        "test_acc": test[-1]["accu"] if test else None,
        "best_step": int(saved[-1][0]) + 1 if saved else None,
        "best_val": float(saved[-1][1]) if saved else None,
    }


def attnlab_run(db, method):
    row = db.execute("SELECT r.id, r.status, j.seed FROM runs r JOIN jobs j ON j.id = r.job_id "
                     "WHERE j.method = ? ORDER BY r.id DESC LIMIT 1", (method,)).fetchone()
    if row is None:
        sys.exit(f"compare: no attnlab run of {method}")
    run, status, seed = row

    def curve(split, name):
        return {step: (value, wall) for step, value, wall in db.execute(
            "SELECT step, value, wall_seconds FROM curves WHERE run_id = ? AND split = ? AND name = ? ORDER BY step",
            (run, split, name))}

    results = dict(db.execute("SELECT name, value FROM results WHERE run_id = ?", (run,)))
    return {"run": run, "status": status, "seed": seed, "loss": curve("train", "loss"),
            "acc": curve("val", "acc"), "results": results}


def fmt(x, spec):
    return format(x, spec) if x is not None else "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--their-seed", default="42")
    parser.add_argument("runs", nargs="+", metavar="METHOD=THEIR_LOG")
    args = parser.parse_args()
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    for arg in args.runs:
        method, log = arg.split("=", 1)
        theirs, ours = their_run(log), attnlab_run(db, method)
        steps = sorted(ours["loss"])
        every = steps[0] if steps else 0
        print(f"\n{method}: theirs src/main.py (seed {args.their_seed}) | attnlab run {ours['run']} "
              f"(seed {ours['seed']}, {ours['status']})")
        print(f"{'step':>6}  {'train loss':^17}  {'val acc':^17}  {'steps/s':^15}")
        print(f"{'':>6}  {'theirs':>8} {'attnlab':>8}  {'theirs':>8} {'attnlab':>8}  {'theirs':>7} {'attnlab':>7}")
        their_time = 0.0
        previous_val_wall = 0.0
        for i, step in enumerate(steps):
            t = theirs["train"][i] if i < len(theirs["train"]) else None
            d = theirs["dev"][i] if i < len(theirs["dev"]) else None
            loss, loss_wall = ours["loss"][step]
            acc, val_wall = ours["acc"].get(step, (None, None))
            window = step - (steps[i - 1] if i else 0)
            their_rate = window / t["t"] if t and t["t"] > 0 else None
            our_rate = window / (loss_wall - previous_val_wall) if loss_wall > previous_val_wall else None
            if t:
                their_time += t["t"]
            if val_wall is not None:
                previous_val_wall = val_wall
            print(f"{step:>6}  {fmt(t and t['loss'], '8.4f'):>8} {loss:8.4f}  {fmt(d and d['accu'], '8.4f'):>8} "
                  f"{fmt(acc, '8.4f'):>8}  {fmt(their_rate, '7.2f'):>7} {fmt(our_rate, '7.2f'):>7}")
        if len(theirs["train"]) != len(steps):
            print(f"  (their log has {len(theirs['train'])} evaluations, attnlab {len(steps)}: was their run cut short?)")
        r = ours["results"]
        their_overall = every * len(theirs["train"]) / their_time if their_time else None
        print(f"  steps/s over the run: theirs {fmt(their_overall, '.2f')}, attnlab {fmt(r.get('steps_per_second'), '.2f')}")
        print(f"  kept weights (best validation after 20% of the steps): theirs step {fmt(theirs['best_step'], 'd')} "
              f"val {fmt(theirs['best_val'], '.4f')}, attnlab step {fmt(r.get('best_step'), '.0f')} "
              f"val {fmt(r.get('best_val_acc'), '.4f')}")
        print(f"  test acc with them: theirs {fmt(theirs['test_acc'], '.4f')}, attnlab {fmt(r.get('test_acc'), '.4f')}"
              f" (majority class {fmt(r.get('majority_rate'), '.4f')})")


if __name__ == "__main__":
    main()
