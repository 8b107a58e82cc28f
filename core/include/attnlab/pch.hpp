#pragma once
// Precompiled once per build and reused by every LibTorch target (cmake/AttnlabTargets.cmake).
// Only stable, heavy third-party headers belong here.
#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>
#include <boost/dll/alias.hpp>
