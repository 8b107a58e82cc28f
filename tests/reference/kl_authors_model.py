"""The KL-Transformer authors' ListOps classifier in PyTorch, written here from its description
(cs1160701/OnLearningTheKernel at a8e3d3b: listops/model.py's ListOpsClassifier over their copy of
fast_transformers: transformers.py's TransformerEncoder and TransformerEncoderLayer with
axial_ordering, attention/attention_layer.py's AttentionLayer, attention/full_attention.py's
FullAttention; utils/model_utils.py's ClassificationHead), for authors_model_test.cpp: attnlab's
weights under these names give the same loss, gradients and AdamW steps.

The model: token embeddings, a learned CLS vector [1, 1, d] prepended, a sinusoid buffer pos_embedding
[1, L + 1, d] added; layers that normalise their input with norm2, add softmax attention over the
valid keys (q, k, v and out projections without bias, temperature 1/sqrt(E)), then normalise that
with norm1 for a GELU feed-forward added back (linear1, linear2); the final LayerNorm, which their
model holds twice (output_norm, transformer.norm: one module); the CLS position through Linear,
ReLU, Linear (classifier.layer1, layer2). Dropout left out (the test runs without it).

Training: AdamW(betas (0.9, 0.98), eps, weight decay) under their LambdaLR, rate x min(1, s / warmup) /
sqrt(max(s, warmup)) stepped once a batch from s = 0, no clipping.

    python3 kl_authors_model.py INPUTS WEIGHTS OUT

INPUTS (safetensors): tokens [B, N], lengths [B], labels [B]; metadata: layers, dim, ffn_dim,
heads, head_dim, vocab, classes, max_len, rate, warmup, steps, eps, weight_decay. WEIGHTS: attnlab's
export. Writes OUT: `loss` [steps], `grad.NAME` (the first step's gradients).
"""
import math
import sys

import torch
import torch.nn as nn
from safetensors import safe_open
from safetensors.torch import load_file, save_file


class AttentionLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        width = c["heads"] * c["head_dim"]
        self.heads = c["heads"]
        self.query_projection = nn.Linear(c["dim"], width, bias=False)
        self.key_projection = nn.Linear(c["dim"], width, bias=False)
        self.value_projection = nn.Linear(c["dim"], width, bias=False)
        self.out_projection = nn.Linear(width, c["dim"], bias=False)

    def forward(self, x, valid):
        n, l, _ = x.shape
        q = self.query_projection(x).view(n, l, self.heads, -1)
        k = self.key_projection(x).view(n, l, self.heads, -1)
        v = self.value_projection(x).view(n, l, self.heads, -1)
        scores = torch.einsum("nlhe,nshe->nhls", q, k) / math.sqrt(q.size(-1))
        scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))  # their length mask, additive -inf
        out = torch.einsum("nhls,nshd->nlhd", torch.softmax(scores, dim=-1), v)
        return self.out_projection(out.reshape(n, l, -1))


class TransformerEncoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = AttentionLayer(c)
        self.linear1 = nn.Linear(c["dim"], c["ffn_dim"])
        self.linear2 = nn.Linear(c["ffn_dim"], c["dim"])
        self.norm1 = nn.LayerNorm(c["dim"])
        self.norm2 = nn.LayerNorm(c["dim"])

    def forward(self, x, valid):
        x = self.norm2(x)  # axial ordering: the input normalised first, the residual from it
        s = x + self.attention(x, valid)
        return s + self.linear2(nn.functional.gelu(self.linear1(self.norm1(s))))


class TransformerEncoder(nn.Module):
    def __init__(self, c, norm):
        super().__init__()
        self.layers = nn.ModuleList([TransformerEncoderLayer(c) for _ in range(c["layers"])])
        self.norm = norm

    def forward(self, x, valid):
        for layer in self.layers:
            x = layer(x, valid)
        return self.norm(x)


class ClassificationHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer1 = nn.Linear(c["dim"], c["ffn_dim"])
        self.layer2 = nn.Linear(c["ffn_dim"], c["classes"])

    def forward(self, x):
        return self.layer2(torch.relu(self.layer1(x)))


class ListOpsClassifier(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.cls_embedding = nn.Parameter(torch.zeros(1, 1, c["dim"]))
        positions = c["max_len"] + 1
        pe = torch.zeros(positions, c["dim"], dtype=torch.float32)  # their sinusoid, in float as theirs
        position = torch.arange(0, positions, dtype=torch.float32).unsqueeze(1)
        div = torch.exp(torch.arange(0, c["dim"], 2).float() * (-math.log(10000.0) / c["dim"]))
        pe[:, 0::2] = torch.sin(position * div)
        pe[:, 1::2] = torch.cos(position * div)
        self.register_buffer("pos_embedding", pe.unsqueeze(0).to(torch.get_default_dtype()))
        self.output_norm = nn.LayerNorm(c["dim"])
        self.input_embeddings = nn.Embedding(c["vocab"], c["dim"], padding_idx=0)
        self.transformer = TransformerEncoder(c, self.output_norm)
        self.classifier = ClassificationHead(c)

    def forward(self, ids, lengths, labels):
        x = self.input_embeddings(ids)
        x = torch.cat([self.cls_embedding.expand(x.size(0), 1, -1), x], dim=1)
        x = x + self.pos_embedding[:, : x.size(1)]
        valid = torch.arange(x.size(1))[None, :] < (lengths + 1)[:, None]  # the CLS counted
        z = self.transformer(x, valid)
        return nn.functional.cross_entropy(self.classifier(z[:, 0]), labels)


def main(inputs_file, weights_file, out_file):
    torch.set_default_dtype(torch.float64)
    inputs = load_file(inputs_file)
    with safe_open(inputs_file, "pt") as f:
        meta = f.metadata()
    c = {k: (float(v) if k in ("rate", "eps", "weight_decay") else int(v)) for k, v in meta.items()}
    model = ListOpsClassifier(c)
    model.load_state_dict(load_file(weights_file), strict=True)  # attnlab's file, as their code would load it
    batch = (inputs["tokens"], inputs["lengths"], inputs["labels"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=c["rate"], betas=(0.9, 0.98), eps=c["eps"],
                                  weight_decay=c["weight_decay"])
    warmup = c["warmup"]
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, s / warmup) / math.sqrt(max(s, warmup)))
    losses, grads = [], {}
    for step in range(c["steps"]):
        optimizer.zero_grad()
        loss = model(*batch)
        loss.backward()
        losses.append(loss.item())
        if step == 0:  # under every name their state_dict has (output_norm and transformer.norm both)
            grads = {"grad." + name: p.grad.clone() for name, p in model.state_dict(keep_vars=True).items()
                     if p.grad is not None}
        optimizer.step()
        schedule.step()
    out = {"loss": torch.tensor(losses)}
    out.update(grads)
    save_file(out, out_file)


if __name__ == "__main__":
    main(*sys.argv[1:4])
