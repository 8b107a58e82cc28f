# @NAME@: an attention method for attnlab, as a TorchScript module. Say here what it computes, with
# the paper's equation.
#
# As written it is exact softmax attention (Vaswani et al., 2017, eq. 1),
#   ATTN(Q, K, V) = softmax(Q Kᵀ / √d) V,  padded keys masked out,
# so that it passes `attnlab check` before you change anything. Replace forward's body with your
# method; keep what the comments ask of it. export.py scripts this class into @NAME@.pt, so it must
# compile under torch.jit.script in PyTorch 1.13 and 2.x: annotate types, and keep to what
# TorchScript accepts (no Python-only constructs, no torch.Generator objects).
import math

import torch


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # Parameters (torch.nn.Parameter) train with the model's optimizer and are saved in resume
        # checkpoints; buffers (self.register_buffer) move with the model and are checkpointed too.
        # Cast them to the inputs' dtype in forward (self.w.to(q.dtype)): attnlab's checks call
        # forward with double inputs, and training may run under autocast.
        #   self.w = torch.nn.Parameter(torch.ones(1))
        #
        # Random numbers (features, landmarks) are drawn in redraw() below, into a registered
        # buffer, from the default generator: attnlab seeds it from the job's seed immediately
        # before each call and restores it after, so the draws follow the job's seed. Draws inside
        # forward use the default generator too, which the job's seed fixes (like dropout), but they
        # then share dropout's stream: redraw() is the idiom. Optional, with their defaults:
        #   self.redraw_every: int = 0              # redraw every N training steps; 0: drawn once
        #   self.fresh_draw_at_eval: bool = False   # True: a fresh draw before each evaluation
        #   self.register_buffer("features", torch.empty(32, 64))

    # Initial values are drawn here, not in __init__: attnlab calls reset_parameters() as each
    # layer's copy loads, with the default generator seeded by the job's seed, so that each layer
    # and each seed starts from a draw of its own. Values drawn in __init__ are the file's: the same
    # in every layer and seed (attnlab warns about a file with parameters and no reset_parameters).
    @torch.jit.export
    def reset_parameters(self) -> None:
        # with torch.no_grad():
        #     self.w.normal_(0.0, 0.02)
        pass

    # A method that draws random numbers defines this (TorchScript compiles an exported method, so
    # it is left out here, where nothing is drawn):
    #
    # @torch.jit.export
    # def redraw(self) -> None:
    #     with torch.no_grad():
    #         self.features.copy_(torch.randn(self.features.shape))

    # q, k, v: [batch, heads, length, head_dim] (float, double, or bfloat16/half under autocast);
    # key_valid: [batch, length] bool, True at real tokens, False at padding. Returns [batch, heads,
    # length, head_dim]. What a real query gets must not depend on anything at padded positions, nor
    # on the other sequences of the batch. Masked logits take a finite large negative number, not
    # -inf, so that a row with no real key stays finite rather than NaN: -1e30, or -60000 in half
    # precision, whose range ends at 65504 (torch.finfo does not script in PyTorch 1.13).
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
        scale = 1.0 / math.sqrt(q.size(-1))
        padded_key = key_valid.logical_not().unsqueeze(1).unsqueeze(2)  # [batch, 1, 1, length]
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale  # [batch, heads, length, length]
        masked = -60000.0 if scores.dtype == torch.float16 else -1e30
        scores = scores.masked_fill(padded_key, masked)
        return torch.matmul(torch.softmax(scores, dim=-1), v)
