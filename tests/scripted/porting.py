# The edits published PyTorch attention modules need before torch.jit.script takes them, one module
# per idiom of plugins/README.md ("Bringing a PyTorch module"), each written as it reads after its
# edit. `python3 porting.py OUTDIR` scripts each into OUTDIR/NAME.pt with the Python torch of the
# build under test; tests/scripted_method_test.cpp runs every check on each (head size 8). Each
# computes softmax attention, or a small variant of it, so that the checks hold it to exact figures.
import math
import sys
from pathlib import Path
from typing import Optional

import torch


def masked_scores(q: torch.Tensor, k: torch.Tensor, key_valid: torch.Tensor, scale: float) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    masked = -60000.0 if scores.dtype == torch.float16 else -1e30
    return scores.masked_fill(key_valid.logical_not()[:, None, None, :], masked)


class NoGradBlock(torch.nn.Module):
    """1. `@torch.no_grad()` on a method -> a `with torch.no_grad():` block inside it. A learnable
    per-head temperature, initialised in reset_parameters()."""

    def __init__(self, heads: int = 2) -> None:
        super().__init__()
        self.temperature = torch.nn.Parameter(torch.ones(heads, 1, 1))

    @torch.jit.export
    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.temperature.uniform_(0.9, 1.1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        t = self.temperature[: q.size(1)].to(q.dtype)
        scores = masked_scores(q * t, k, key_valid, q.size(-1) ** -0.5)
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.matmul(torch.softmax(masked_scores(q, k, key_valid, scale), dim=-1), v)


class PositionalArguments(torch.nn.Module):
    """2. Keyword-only arguments and functools.partial -> positional arguments, the bound value an
    attribute of its own type."""

    def __init__(self, scale: float = 0.25) -> None:
        super().__init__()
        self.scale: float = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        return attend(q, k, v, key_valid, self.scale * (8 / q.size(-1)) ** 0.5)


class KernelByName(torch.nn.Module):
    """3. A function held as an attribute (self.kernel = F.elu) -> its name, and a branch."""

    def __init__(self, kernel: str = "softmax") -> None:
        super().__init__()
        self.kernel: str = kernel

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        scores = masked_scores(q, k, key_valid, q.size(-1) ** -0.5)
        if self.kernel == "softmax":
            weights = torch.softmax(scores, dim=-1)
        else:
            weights = torch.softmax(scores.float(), dim=-1).to(scores.dtype)
        return torch.matmul(weights, v)


def merge_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[batch, heads, n, d] -> [batch, n, heads * d]"""
    return x.transpose(1, 2).reshape(x.size(0), x.size(2), heads * x.size(3))


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[batch, n, heads * d] -> [batch, heads, n, d]"""
    return x.reshape(x.size(0), x.size(1), heads, x.size(2) // heads).transpose(1, 2)


class AnnotatedInts(torch.nn.Module):
    """4. Unannotated int arguments (TorchScript takes them for Tensors) -> `heads: int`. The heads
    merged and split again around softmax, as a module written for [batch, n, dim] does."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        heads = q.size(1)
        q, k, v = (split_heads(merge_heads(x, heads), heads) for x in (q, k, v))
        return attend(q, k, v, key_valid, q.size(-1) ** -0.5)


class LocalsNotAttributes(torch.nn.Module):
    """5. An attribute created in forward (self.attn = weights, for a later look) -> a local, or an
    attribute declared in __init__ with its type."""

    def __init__(self) -> None:
        super().__init__()
        self.last_entropy: float = 0.0

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(masked_scores(q, k, key_valid, q.size(-1) ** -0.5), dim=-1)
        if not self.training:
            self.last_entropy = float(-(weights * torch.log(weights + 1e-9)).sum(-1).mean())
        return torch.matmul(weights, v)


class MathNotNumPy(torch.nn.Module):
    """6. NumPy in forward (np.sqrt(d), np.log) -> math, or torch on the tensors."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        return attend(q, k, v, key_valid, 1.0 / math.sqrt(q.size(-1)))


class ReshapeNotEinops(torch.nn.Module):
    """7. einops (rearrange(x, 'b h n d -> (b h) n d')) -> reshape and transpose."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        b, h, n, d = q.shape
        qf, kf, vf = (x.reshape(b * h, n, d) for x in (q, k, v))
        valid = key_valid[:, None, :].expand(b, h, n).reshape(b * h, n)
        scores = torch.bmm(qf, kf.transpose(1, 2)) / math.sqrt(d)
        masked = -60000.0 if scores.dtype == torch.float16 else -1e30
        scores = scores.masked_fill(valid.logical_not()[:, None, :], masked)
        return torch.bmm(torch.softmax(scores, dim=-1), vf).reshape(b, h, n, d)


def with_bias(scores: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    if bias is not None:
        return scores + bias.to(scores.dtype)
    return scores


class OptionalNotTypeTest(torch.nn.Module):
    """8. `type(bias) == torch.Tensor` -> an Optional[Tensor] argument and `is not None`."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        bias: Optional[torch.Tensor] = None
        scores = with_bias(masked_scores(q, k, key_valid, q.size(-1) ** -0.5), bias)
        return torch.matmul(torch.softmax(scores, dim=-1), v)


class ListShapes(torch.nn.Module):
    """9. Tuple concatenation of shapes (x.shape[:-1] + (m,)) -> lists (list(x.shape[:-1]) + [m]):
    a shape is List[int] in TorchScript."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        out = attend(q, k, v, key_valid, q.size(-1) ** -0.5)
        flat = out.reshape(list(out.shape[:-2]) + [out.size(-2) * out.size(-1)])
        return flat.reshape(list(flat.shape[:-1]) + [out.size(-2), out.size(-1)])


class TorchPlan(torch.nn.Module):
    """10. A random plan drawn with NumPy (np.random.permutation) -> torch.randperm in redraw(),
    into a buffer: the job's seed draws it. Here the plan is which half of the head's dimensions
    the scores use."""

    def __init__(self, head_dim: int = 8) -> None:
        super().__init__()
        self.register_buffer("plan", torch.ones(head_dim))

    @torch.jit.export
    def redraw(self) -> None:
        chosen = torch.randperm(self.plan.size(0))[: self.plan.size(0) // 2]
        with torch.no_grad():
            self.plan.zero_()
            self.plan.index_fill_(0, chosen, 1.0)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        kept = self.plan.to(q.dtype)
        return attend(q * kept, k, v, key_valid, 1.0 / math.sqrt(q.size(-1) // 2))


MODULES = {
    "port_no_grad": NoGradBlock,
    "port_positional": PositionalArguments,
    "port_kernel_by_name": KernelByName,
    "port_annotated_ints": AnnotatedInts,
    "port_locals": LocalsNotAttributes,
    "port_math": MathNotNumPy,
    "port_reshape": ReshapeNotEinops,
    "port_optional": OptionalNotTypeTest,
    "port_list_shapes": ListShapes,
    "port_torch_plan": TorchPlan,
}

if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, module in MODULES.items():
        torch.jit.script(module()).save(str(out / (name + ".pt")), _extra_files={"torch_version": torch.__version__})
    print(len(MODULES), "modules scripted by torch", torch.__version__)
