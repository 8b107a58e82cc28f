# Attention methods written in PyTorch for the tests of TorchScript methods
# (runner/plugin_host/scripted_method.cpp): `python3 methods.py OUTDIR` scripts each into
# OUTDIR/NAME.pt with the Python torch that matches the build under test (tests/CMakeLists.txt),
# so that no binary is checked in. Shapes: q, k, v [batch, heads, length, head_dim]; key_valid
# [batch, length], True at real tokens.
import sys
from pathlib import Path

import torch

import porting  # the modules of plugins/README.md's "Bringing a PyTorch module", after their edits


def masked_logit(scores: torch.Tensor) -> float:
    return -60000.0 if scores.dtype == torch.float16 else -1e30


def softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-2, -1)) / (q.size(-1) ** 0.5)
    scores = scores.masked_fill(key_valid.logical_not()[:, None, None, :], masked_logit(scores))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


class Softmax(torch.nn.Module):
    """Exact softmax attention: what the native softmax plugin computes."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        return softmax_attention(q, k, v, key_valid)


def projected_attention(
    projection: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor
) -> torch.Tensor:
    e = projection.to(q.dtype) * key_valid[:, None, None, :].to(q.dtype)  # [batch, 1, rank, n]
    scores = torch.matmul(q, torch.matmul(e, k).transpose(-2, -1)) / (q.size(-1) ** 0.5)
    return torch.matmul(torch.softmax(scores, dim=-1), torch.matmul(e, v))


def draw_projection(projection: torch.Tensor) -> None:
    """Linformer's E drawn afresh: N(0, 1/n) entries for n tokens."""
    with torch.no_grad():
        projection.normal_(0.0, projection.size(1) ** -0.5)


class Projection(torch.nn.Module):
    """Linformer's learnable projection (Wang et al., 2020, eq. 7): keys and values of the real
    tokens projected along the sequence to `rank` rows by E, trained with the model."""

    def __init__(self, rank: int = 4, max_len: int = 64) -> None:
        super().__init__()
        self.projection = torch.nn.Parameter(torch.randn(rank, max_len) / max_len ** 0.5)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        return projected_attention(self.projection[:, : k.size(2)], q, k, v, key_valid)


class Features(torch.nn.Module):
    """Random Fourier-feature attention with positive features (Performer's FAVOR+, Choromanski et
    al., 2021, eq. 5) whose ω are drawn in redraw() from the default generator, every 4 steps."""

    def __init__(self, head_dim: int = 8, features: int = 16) -> None:
        super().__init__()
        self.redraw_every: int = 4
        self.fresh_draw_at_eval: bool = True
        self.register_buffer("omega", torch.zeros(head_dim, features))

    @torch.jit.export
    def redraw(self) -> None:
        with torch.no_grad():
            self.omega.copy_(torch.randn(self.omega.shape))

    def phi(self, x: torch.Tensor) -> torch.Tensor:
        x = x / x.size(-1) ** 0.25
        projected = torch.matmul(x, self.omega.to(x.dtype))
        squared = (x * x).sum(-1, keepdim=True) / 2
        return torch.exp(projected - squared) / self.omega.size(1) ** 0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        keep = key_valid[:, None, :, None].to(q.dtype)
        qf, kf = self.phi(q), self.phi(k) * keep
        numerator = torch.matmul(qf, torch.matmul(kf.transpose(-2, -1), v))
        denominator = torch.matmul(qf, kf.sum(2).unsqueeze(-1)) + 1e-6
        return numerator / denominator


class Leaky(torch.nn.Module):
    """Softmax that forgets the padding mask: attends to padded keys too."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        return softmax_attention(q, k, v, torch.ones_like(key_valid))


class WrongSignature(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Raises(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        if q.size(2) > 0:
            raise ValueError("this method is not written yet")
        return q


class RaisesInTraining(torch.nn.Module):
    """Passes the checks (eval mode), then raises at the first training step."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        if self.training:
            raise RuntimeError("scripted method gave up in training")
        return softmax_attention(q, k, v, key_valid)


class ResetProjection(torch.nn.Module):
    """Linformer's E as Projection, and a Performer-like projection of the heads' features, both
    drawn again by reset_parameters() from the generator attnlab seeds with the job's seed."""

    def __init__(self, rank: int = 4, max_len: int = 64, head_dim: int = 8) -> None:
        super().__init__()
        self.projection = torch.nn.Parameter(torch.randn(rank, max_len) / max_len ** 0.5)
        self.mix = torch.nn.Parameter(torch.eye(head_dim))

    @torch.jit.export
    def reset_parameters(self) -> None:
        draw_projection(self.projection)
        with torch.no_grad():
            self.mix.copy_(torch.eye(self.mix.size(0)) + 0.1 * torch.randn(self.mix.shape))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        q = torch.matmul(q, self.mix.to(q.dtype))
        return projected_attention(self.projection[:, : k.size(2)], q, k, v, key_valid)


class ShapeBound(torch.nn.Module):
    """A module made for one job's shape, as published ones are: Linformer's E for exactly
    `max_len` tokens (no slicing) and a per-dimension output gain for head size `head_dim`, which
    says so with fixed_length."""

    def __init__(self, rank: int = 8, max_len: int = 128, head_dim: int = 16) -> None:
        super().__init__()
        self.fixed_length: bool = True
        self.projection = torch.nn.Parameter(torch.randn(rank, max_len) / max_len ** 0.5)
        self.gain = torch.nn.Parameter(torch.ones(head_dim))

    @torch.jit.export
    def reset_parameters(self) -> None:
        draw_projection(self.projection)
        with torch.no_grad():
            self.gain.uniform_(0.9, 1.1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        if k.size(2) != self.projection.size(1):
            raise ValueError("made for " + str(self.projection.size(1)) + " tokens, given " + str(k.size(2)))
        # E K and E V as a product and a sum over the tokens: 1.13's bf16 matmul on the CPU rounds
        # as it accumulates (1.3% off over 128 terms, 2.11's 0.15%), a sum does not
        e = (self.projection.to(q.dtype) * key_valid[:, None, None, :].to(q.dtype)).unsqueeze(-1)  # [b, 1, r, n, 1]
        ek, ev = (e * k.unsqueeze(2)).sum(3), (e * v.unsqueeze(2)).sum(3)  # [b, h, r, d]
        scores = torch.matmul(q, ek.transpose(-2, -1)) / (q.size(-1) ** 0.5)
        return torch.matmul(torch.softmax(scores, dim=-1), ev) * self.gain.to(q.dtype)


class BatchCoupled(torch.nn.Module):
    """Softmax for one length (fixed_length) whose keys are scaled by their largest real entry over
    the whole batch, as a max over the batch in the Skyformer authors' code does: padding ignored,
    but a sequence's output depends on the other sequences of its batch."""

    def __init__(self, max_len: int = 128) -> None:
        super().__init__()
        self.fixed_length: bool = True
        self.max_len = max_len

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        if k.size(2) != self.max_len:
            raise ValueError("made for " + str(self.max_len) + " tokens, given " + str(k.size(2)))
        real = key_valid[:, None, :, None].to(k.dtype)
        k = k / (k * real).abs().max().clamp_min(1e-6)
        return softmax_attention(q, k, v, key_valid)


class BatchOfTwo(torch.nn.Module):
    """Softmax for batches of 2 only, as a trace made at batch 2 with its shapes baked in is."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        if q.size(0) != 2:
            raise ValueError("made for batches of 2, given " + str(q.size(0)))
        return softmax_attention(q, k, v, key_valid)


class DrawsInForward(torch.nn.Module):
    """Softmax at a temperature drawn in forward itself (not in redraw()): every call differs."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        temperature = (1.0 + 0.5 * torch.rand(1, device=q.device)).to(q.dtype)
        return softmax_attention(q * temperature, k, v, key_valid)


class DrawsByLength(torch.nn.Module):
    """Softmax with a bias per key drawn in forward (a permutation of the n keys, over n): a draw
    whose size follows the sequence's length, so a shorter sequence is biased by another draw."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        n = k.size(2)
        bias = (torch.randperm(n, device=q.device).to(q.dtype) / n)[None, None, None, :]
        scores = torch.matmul(q, k.transpose(-2, -1)) / (q.size(-1) ** 0.5) + bias
        scores = scores.masked_fill(~key_valid[:, None, None, :], -1e30)
        return torch.matmul(torch.softmax(scores, dim=-1), v)


class DropoutSoftmax(torch.nn.Module):
    """Softmax with dropout on the attention weights: scripted, it drops in training only; traced
    in eval, torch.jit.trace freezes its training flag to False."""

    def __init__(self) -> None:
        super().__init__()
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) / (q.size(-1) ** 0.5)
        scores = scores.masked_fill(key_valid.logical_not()[:, None, None, :], masked_logit(scores))
        return torch.matmul(self.dropout(torch.softmax(scores, dim=-1)), v)


def trace(module: torch.nn.Module, path: Path) -> None:
    x = torch.randn(2, 2, 16, 8)
    traced = torch.jit.trace(module.eval(), (x, x, x, torch.ones(2, 16, dtype=torch.bool)))
    traced.save(str(path), _extra_files={"torch_version": torch.__version__})


def save(module: torch.nn.Module, path: Path, version: str = torch.__version__) -> None:
    torch.jit.script(module).save(str(path), _extra_files={"torch_version": version})


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    save(Softmax(), out / "softmax_script.pt")
    save(Projection(), out / "projection.pt")
    save(ResetProjection(), out / "reset_projection.pt")
    save(ShapeBound(), out / "shape_bound.pt")
    save(DrawsInForward(), out / "draws_in_forward.pt")
    save(DrawsByLength(), out / "draws_by_length.pt")
    save(BatchOfTwo(), out / "batch_of_two.pt")
    save(BatchCoupled(), out / "batch_coupled.pt")
    save(Softmax(), out / "skyformer.pt")
    save(DropoutSoftmax(), out / "dropout_script.pt")
    trace(DropoutSoftmax(), out / "traced_dropout.pt")
    trace(Softmax(), out / "traced_softmax.pt")
    save(Features(), out / "features.pt")
    save(Leaky(), out / "leaky.pt")
    save(WrongSignature(), out / "wrong_signature.pt")
    save(Raises(), out / "raises.pt")
    save(RaisesInTraining(), out / "raises_in_training.pt")
    save(Softmax(), out / "future.pt", version="99.1.0")
    torch.jit.script(Softmax()).save(str(out / "no_version_note.pt"))
    torch.save(torch.zeros(3), str(out / "tensor.pt"))
    (out / "text.pt").write_text("not a TorchScript file\n")
    for name, module in porting.MODULES.items():
        save(module(), out / (name + ".pt"))
    print(torch.__version__)
