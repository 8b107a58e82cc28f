"""PyTorch's own values for the training formulas attnlab reimplements (pytorch_formulas_test.cpp):
OneCycleLR's learning rate and beta1 over whole schedules, the KL authors' LambdaLR, AdamW under OneCycleLR with
clip_grad_value_, clip_grad_value_ itself, and the LRA code's "MEAN" pooling. Run by the Python
torch of the build under test; writes one line per series: `name count v1 v2 ...` (repr floats)."""
import math
import sys
import warnings

import torch

torch.set_default_dtype(torch.float32)


def formula(n, a, b, scale=1.0):
    """The same deterministic numbers the C++ side makes: scale * sin(a * i + b), i = 0..n-1."""
    return (scale * torch.sin(a * torch.arange(n, dtype=torch.float64) + b)).float()


def one_cycle(lr, warmup, steps, anneal):
    """OneCycleLR's (lr, beta1) for each of `steps` optimiser steps, as the LRA code drives it."""
    w = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.AdamW([w], lr=lr, betas=(0.9, 0.999), eps=1e-6)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=lr, pct_start=warmup / steps, anneal_strategy=anneal, total_steps=steps)
    lrs, beta1s = [], []
    for step in range(steps):
        group = optimizer.param_groups[0]
        lrs.append(group["lr"])
        beta1s.append(group["betas"][0])
        if step + 1 < steps:  # (without optimizer.step(), which changes nothing here and is slow)
            schedule.step()
    return lrs, beta1s


def kl_authors_schedule(lr, warmup, steps):
    """The KL authors' LambdaLR (their listops/train.py): lr * min(1, s / W) / sqrt(max(s, W)), stepped once a batch."""
    w = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.AdamW([w], lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, s / warmup) / math.sqrt(max(s, warmup)))
    lrs = []
    for step in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        if step + 1 < steps:
            schedule.step()
    return lrs


def adamw_one_cycle_clipped():
    """Two parameters, 100 steps of AdamW under OneCycleLR, gradients from a formula clipped to [-1, 1]."""
    shapes = [(3, 4), (5,)]
    params = [formula(math.prod(s), 0.5, 0.1 + k).view(s).clone().requires_grad_(True) for k, s in enumerate(shapes)]
    optimizer = torch.optim.AdamW(params, lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=0.01, pct_start=10 / 100, anneal_strategy="linear", total_steps=100)
    for step in range(100):
        optimizer.zero_grad()
        for k, p in enumerate(params):
            p.grad = formula(p.numel(), 0.3, 0.7 * step + k, 2.5).view(p.shape)
        torch.nn.utils.clip_grad_value_(params, clip_value=1.0)
        optimizer.step()
        if step + 1 < 100:
            schedule.step()
    return torch.cat([p.detach().flatten() for p in params]).tolist()


def clipped_values():
    p = torch.zeros(20, requires_grad=True)
    p.grad = formula(20, 0.9, 0.0, 3.0)
    torch.nn.utils.clip_grad_value_([p], clip_value=1.25)
    return p.grad.tolist()


def lra_mean_pooling():
    """Skyformer's / Nystromformer's LRA "MEAN": (LayerNorm(X) * mask).mean(dim=1)."""
    batch, length, dim = 3, 6, 4
    x = formula(batch * length * dim, 0.37, 0.0).view(batch, length, dim)
    mask = (torch.arange(length)[None, :] < torch.tensor([6, 3, 1])[:, None]).float()
    norm = torch.nn.LayerNorm(dim)
    return (norm(x) * mask[:, :, None]).mean(dim=1).flatten().tolist()


def main():
    warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*")  # stepped without optimizer.step()
    series = {}
    for name, (lr, warmup, steps, anneal) in {
        "skyformer_listops": (1e-4, 1000, 50000, "linear"),
        "cosine": (2e-4, 30, 300, "cos"),
        "no_warmup": (1e-3, 0, 100, "linear"),
        "uneven": (3e-4, 7, 93, "linear"),
    }.items():
        series[name + "_lr"], series[name + "_beta1"] = one_cycle(lr, warmup, steps, anneal)
    series["kl_listops_lr"] = kl_authors_schedule(5e-3, 1000, 12000)
    series["kl_text_lr"] = kl_authors_schedule(5e-2, 8000, 20000)
    series["adamw_one_cycle_clipped"] = adamw_one_cycle_clipped()
    series["clip_grad_value"] = clipped_values()
    series["lra_mean_pooling"] = lra_mean_pooling()
    with open(sys.argv[1], "w") as out:
        for name, values in series.items():
            out.write(name + " " + str(len(values)) + " " + " ".join(repr(float(v)) for v in values) + "\n")


if __name__ == "__main__":
    main()
