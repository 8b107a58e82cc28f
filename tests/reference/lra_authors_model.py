"""The Skyformer authors' LRA classifier in PyTorch, written here from its description (pkuzengqi/Skyformer
at 1a677cb: src/models/model_transformer.py, model_LRA.py, attention.py, attention_skyformer.py; their
Nystromformer's LRA code is the same model), for weights_test.cpp: the same weights and batch through
this model and attnlab's give the same loss, gradients and AdamW steps.

The model: token and learned position embeddings; pre-norm blocks X += ff(attn(norm1 X)), X +=
mlpblock(norm2 X) with W_q, W_k, W_v and ff linear layers and an exact-GELU feed-forward; a final
LayerNorm times the mask; the mean over every position of the padded sequence; Linear, ReLU, Linear.
Its module names are theirs, so its state_dict's keys are the ones their checkpoints hold (the
attribute `seq_classifer` spelled as they spell it). Dropout is left out (the test runs without it):
its modules stay where theirs are, so that mlpblock's indices are theirs.

Attention: their SoftmaxAttention (an additive -1e6 on padded keys) or their Skyformer: q, k scaled by
p^-1/4 and masked, v masked; landmarks at floor(u * L) of the stacked [Q; K] (the first half from Q,
the rest from K), u one vector per call shared by the batch and heads; the Gaussian kernel
exp(x.y - |x|^2/2 - |y|^2/2); the landmark block plus 0.1 I, normalised by its row sums; their
iterative_inv with init_option "original" (Z0 = A^T over the largest column sum of the whole
batch); out = k(Q, L) D Z D k(L, K) (V * mask). Here everything runs in the default dtype (float64
in the test) where their module casts to float, and u comes from the test (attnlab's draws) where
theirs is torch.rand.

Training: AdamW(betas (0.9, 0.999), eps, no weight decay) under OneCycleLR(max_lr = lr, pct_start =
warmup / steps, linear anneal), clip_grad_value_ before each step, as their src/main.py.

    python3 lra_authors_model.py ATTENTION INPUTS WEIGHTS OUT AUTHORS_INIT

INPUTS (safetensors): tokens [B, N], mask [B, N], labels [B], draws [steps, layers, m] (Skyformer's u),
and its metadata: layers, dim, ffn_dim, heads, head_dim, vocab, classes, max_len, landmarks, lr,
warmup, steps, eps, clip_value. WEIGHTS: attnlab's export. Writes OUT: `loss` [steps] (each step's loss
before its update), `grad.NAME` (the first step's gradients), `init_loss` (the loss of this model's own
initialisation, which it writes to AUTHORS_INIT for attnlab to load).
"""
import math
import sys

import torch
import torch.nn as nn
from safetensors import safe_open
from safetensors.torch import load_file, save_file


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab"], c["dim"])
        self.position_embeddings = nn.Embedding(c["max_len"], c["dim"])
        nn.init.normal_(self.word_embeddings.weight, std=0.02)
        nn.init.normal_(self.position_embeddings.weight, std=0.02)

    def forward(self, ids):
        positions = torch.arange(ids.size(1), device=ids.device)[None, :].expand_as(ids)
        return self.word_embeddings(ids) + self.position_embeddings(positions)


class SoftmaxAttention(nn.Module):
    def __init__(self, c, draws):
        super().__init__()
        self.head_dim = c["head_dim"]

    def forward(self, q, k, v, mask):
        dot = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim) - 1e6 * (1 - mask[:, None, None, :])
        return torch.softmax(dot, dim=-1) @ v


def iterative_inv(a, iterations=6):
    """Razavi's iteration from their "original" start: A^T over the largest column sum of the whole batch."""
    eye = torch.eye(a.size(-1), dtype=a.dtype)
    z = a.transpose(-1, -2) / torch.max(torch.sum(a, dim=-2))
    for _ in range(iterations):
        az = a @ z
        z = (0.25 * z) @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


class Skyformer(nn.Module):
    def __init__(self, c, draws):
        super().__init__()
        self.landmarks = c["landmarks"]
        self.draws = draws  # [calls, m]: this layer's u of each call, in order
        self.calls = 0

    def kernel(self, x, y):
        """exp(-|x - y|^2 / 2) between the rows of x and y."""
        return torch.exp(x @ y.transpose(-1, -2) - 0.5 * (x * x).sum(-1, keepdim=True) - 0.5 * (y * y).sum(-1)[..., None, :])

    def forward(self, q, k, v, mask):
        b, h, n, p = q.shape
        m = self.landmarks
        scale = p ** -0.25
        q = q * mask[:, None, :, None] * scale
        k = k * mask[:, None, :, None] * scale
        v = v * mask[:, None, :, None]
        u = self.draws[self.calls]
        self.calls += 1
        rows = torch.floor(mask.sum(-1)[:, None] * u[None, :]).long()  # [b, m]
        rows[:, m // 2:] += n                                            # the second half from K
        x = torch.cat([q, k], dim=2)                                     # [b, h, 2n, p]
        marks = x.gather(2, rows[:, None, :, None].expand(b, h, m, p))  # [b, h, m, p]
        kx = self.kernel(x, marks)                                       # [b, h, 2n, m]
        block = kx.gather(2, rows[:, None, :, None].expand(b, h, m, m)) + 0.1 * torch.eye(m, dtype=q.dtype)
        d = torch.sqrt(1 / block.sum(-1))                                # [b, h, m]
        z = iterative_inv(d[..., :, None] * block * d[..., None, :])
        kk = (kx[:, :, n:] * d[..., None, :]) @ z
        kk = kk * d[..., None, :] * mask[:, None, :, None]
        return kx[:, :, :n] @ (kk.transpose(-1, -2) @ v)


ATTENTION = {"softmax": SoftmaxAttention, "skyformer": Skyformer}


class Attention(nn.Module):
    def __init__(self, c, attention, draws):
        super().__init__()
        width = c["heads"] * c["head_dim"]
        self.heads = c["heads"]
        self.W_q = nn.Linear(c["dim"], width)
        self.W_k = nn.Linear(c["dim"], width)
        self.W_v = nn.Linear(c["dim"], width)
        self.attn = ATTENTION[attention](c, draws)
        self.ff = nn.Linear(width, c["dim"])

    def split_heads(self, x):
        return x.reshape(x.size(0), x.size(1), self.heads, -1).transpose(1, 2)

    def forward(self, x, mask):
        out = self.attn(self.split_heads(self.W_q(x)), self.split_heads(self.W_k(x)), self.split_heads(self.W_v(x)), mask)
        return self.ff(out.transpose(1, 2).reshape(x.size(0), x.size(1), -1))


class TransformerLayer(nn.Module):
    def __init__(self, c, attention, draws):
        super().__init__()
        self.norm1 = nn.LayerNorm(c["dim"])
        self.mha = Attention(c, attention, draws)
        self.norm2 = nn.LayerNorm(c["dim"])
        self.mlpblock = nn.Sequential(nn.Linear(c["dim"], c["ffn_dim"]), nn.GELU(), nn.Dropout(0.0),
                                      nn.Linear(c["ffn_dim"], c["dim"]), nn.Dropout(0.0))

    def forward(self, x, mask):
        x = self.mha(self.norm1(x), mask) + x
        return self.mlpblock(self.norm2(x)) + x


class Model(nn.Module):
    def __init__(self, c, attention, draws):
        super().__init__()
        self.layers = c["layers"]
        self.embeddings = Embeddings(c)
        for i in range(self.layers):
            setattr(self, f"transformer_{i}", TransformerLayer(c, attention, draws[:, i]))
        self.norm = nn.LayerNorm(c["dim"])

    def forward(self, ids, mask):
        x = self.embeddings(ids)
        for i in range(self.layers):
            x = getattr(self, f"transformer_{i}")(x, mask)
        return self.norm(x) * mask[:, :, None]


class SCHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.mlpblock = nn.Sequential(nn.Linear(c["dim"], c["ffn_dim"]), nn.ReLU(), nn.Linear(c["ffn_dim"], c["classes"]))

    def forward(self, x):
        return self.mlpblock(x.mean(dim=1))  # their "MEAN": over every position of the padded sequence


class ModelForSC(nn.Module):
    def __init__(self, c, attention, draws):
        super().__init__()
        self.model = Model(c, attention, draws)
        self.seq_classifer = SCHead(c)

    def forward(self, ids, mask, labels):
        scores = self.seq_classifer(self.model(ids, mask))
        return nn.CrossEntropyLoss(reduction="none")(scores, labels).mean()


def restart_draws(model):
    for module in model.modules():
        if isinstance(module, Skyformer):
            module.calls = 0


def train(model, batch, c):
    """Their loop's steps: zero_grad, backward, clip_grad_value_, AdamW, OneCycleLR. Returns each step's
    loss and the first step's gradients."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=(0.9, 0.999), eps=c["eps"], weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=c["lr"], pct_start=c["warmup"] / c["steps"],
                                                   anneal_strategy="linear", total_steps=c["steps"])
    losses, grads = [], {}
    for step in range(c["steps"]):
        optimizer.zero_grad()
        loss = model(*batch)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            grads = {"grad." + name: p.grad.clone() for name, p in model.named_parameters()}
        torch.nn.utils.clip_grad_value_(model.parameters(), c["clip_value"])
        optimizer.step()
        schedule.step()
    return losses, grads


def main(attention, inputs_file, weights_file, out_file, authors_init_file):
    torch.set_default_dtype(torch.float64)
    inputs = load_file(inputs_file)
    with safe_open(inputs_file, "pt") as f:  # the settings ride in the file's metadata
        meta = f.metadata()
    c = {k: (float(v) if k in ("lr", "eps", "clip_value") else int(v)) for k, v in meta.items() if k != "format"}
    batch = (inputs["tokens"], inputs["mask"], inputs["labels"])
    draws = inputs["draws"]

    model = ModelForSC(c, attention, draws)
    model.load_state_dict(load_file(weights_file), strict=True)  # attnlab's file, as their code would load it
    losses, grads = train(model, batch, c)

    torch.manual_seed(7)
    theirs = ModelForSC(c, attention, draws)  # this model's own initialisation, for attnlab to start from
    save_file({k: v.contiguous() for k, v in theirs.state_dict().items()}, authors_init_file)
    with torch.no_grad():
        init_loss = theirs(*batch)

    out = {"loss": torch.tensor(losses), "init_loss": init_loss.reshape(1)}
    out.update(grads)
    save_file(out, out_file)


if __name__ == "__main__":
    main(*sys.argv[1:6])
