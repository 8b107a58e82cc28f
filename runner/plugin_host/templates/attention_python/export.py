# Scripts @NAME@.Attention with TorchScript and saves it beside this file as @NAME@.pt, the file an
# experiment names ([methods.@NAME@] script = "@NAME@.pt"). Run it with the Python torch that
# matches attnlab's LibTorch: python3 @NAME@/export.py
#
# The torch_version record lets attnlab refuse a file saved by a newer PyTorch than its LibTorch in
# one line naming both, rather than fail somewhere inside loading it.
from pathlib import Path

import torch

import @NAME@

out = Path(__file__).with_name("@NAME@.pt")
torch.jit.save(torch.jit.script(@NAME@.Attention()), str(out), _extra_files={"torch_version": torch.__version__})
print(f"wrote {out} with torch {torch.__version__}")
