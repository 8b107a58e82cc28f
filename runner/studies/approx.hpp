#pragma once
// attnlab approx: how far an efficient attention method's output is from exact attention
// (Skyformer, Chen et al. 2021, §4.5 and Fig. 1). For each method x sequence length n x number of
// features/landmarks d, on the q, k, v a layer's attention sees (or on arrays from .npy files):
// per (sequence, head), the spectral norm ||Attn_method(Q,K,V) - Attn_exact(Q,K,V)||_2 of the
// n x p difference over the real rows, absolute and relative to ||Attn_exact(Q,K,V)||_2, averaged
// over heads x draws x sequences. Everything here is callable without the command line.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "attnlab/attention.hpp"
#include "attnlab/store.hpp"
#include "attnlab/store/studies.hpp"
#include "attnlab/train/model.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

// Rows = method x length, columns = d, cells "mean ± std" of the relative (or absolute) error;
// one table per (source, parameter, device). A later row for the same cell replaces an earlier one.
std::string approx_table(const std::vector<store::ApproxResult>& rows, bool absolute);

// Bad options or inputs of the study; the message is one line.
struct ApproxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What an attention module is given: q, k, v [B, H, n, p] float32 and key_valid [B, n] bool
// (true = real token). Query rows at padded positions are left out of every norm.
struct AttentionInputs {
  at::Tensor q, k, v, key_valid;
  std::int64_t length() const { return q.size(2); }
};

// Largest singular value of every matrix in x [..., n, p], computed in double.
at::Tensor spectral_norms(const at::Tensor& x);

// Per (b, h): ||approx - exact||_2 and ||exact||_2 over the rows where row_valid [B, n] is true
// (double, [B, H]). Padded rows are replaced by zeros, which leaves singular values unchanged.
struct NormPair {
  at::Tensor error, exact;
};
NormPair approximation_norms(const at::Tensor& approx, const at::Tensor& exact, const at::Tensor& row_valid);

// Mean and standard deviation (n - 1 in the denominator; 0 for a single sample).
struct ErrorStats {
  std::int64_t samples = 0;
  double abs_mean = 0, abs_std = 0, rel_mean = 0, rel_std = 0;
};
ErrorStats summarize(const std::vector<double>& abs_errors, const std::vector<double>& rel_errors);

// The method's output on all of `in`, in chunks of sequences small enough for an n x n score
// matrix per head to stay within a few hundred MB.
at::Tensor attend(AttentionMethod& method, const AttentionInputs& in);

// `method` against the exact output: one evaluation if the method is deterministic, else `draws`
// fresh draws, draw i redrawn from a CPU generator seeded by draw_seed(seed, i).
ErrorStats measure(AttentionMethod& method, const at::Tensor& exact_out, const AttentionInputs& in,
                   std::int64_t draws, std::uint64_t seed);
std::uint64_t draw_seed(std::uint64_t seed, std::int64_t draw);

// --exact auto: kernelized for skyformer (its target is the Gaussian-kernelized attention), softmax
// for everything else.
std::string reference_for(const std::string& method, const std::string& exact);

struct ApproxStudy {
  std::vector<std::string> methods;
  std::vector<std::int64_t> lengths;   // each n to evaluate at
  std::vector<std::int64_t> features{16, 32, 64, 128, 256};
  std::string param = "landmarks";     // the method parameter set to d
  // other parameters, per method or reference: name -> (key, value as TOML would write it); the
  // rows then name it "name[key=value,...]"
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> method_params;
  std::string exact = "auto";          // softmax | kernelized | auto
  std::int64_t draws = 3;              // for stochastic methods
  std::uint64_t seed = 0;
  std::string device = "cpu";
  std::string source;                  // init:<dataset> | run:<id> | npy:<dir>
};

// Checks the study against the loaded plugins before anything is computed: every method and
// reference exists, every method has the parameter (a method equal to its own reference needs
// none: it is the exactness check, error 0 at every d) and accepts every d, and every
// method_params entry names a method or reference of the study and one of its parameters.
// Throws ApproxError.
void check_study(const ApproxStudy& study, const PluginRegistry& registry);

// Runs the study. `inputs(n)` gives the attention inputs at length n (on study.device).
// `on_rows` receives each (method, length)'s cells as soon as they are done; a cell whose method
// throws is reported through `on_failure` and left out, and the study goes on.
struct ApproxCallbacks {
  std::function<void(const std::vector<store::ApproxResult>&)> on_rows;
  std::function<void(const std::string& method, std::int64_t length, std::int64_t d, const std::string& error)> on_failure;
};
std::vector<store::ApproxResult> run_approx_study(const ApproxStudy& study, const PluginRegistry& registry,
                                                  const std::function<AttentionInputs(std::int64_t)>& inputs,
                                                  const ApproxCallbacks& callbacks = {});

// --- where q, k, v come from ---------------------------------------------------------------

// q.npy, k.npy, v.npy in `dir`: [H, n, p] or [B, H, n, p], '<f4' or '<f8', identical shapes;
// returned as float32 with every key valid. Throws NpyError naming the file.
AttentionInputs npy_inputs(const std::string& dir);
// The first `length` rows (queries and keys) of `all`.
AttentionInputs first_rows(const AttentionInputs& all, std::int64_t length);

// A model whose layer 0 turns token sequences into q, k, v.
struct ModelSource {
  EncoderClassifier model{nullptr};
  at::Tensor tokens;         // [B, L0] int64 (the first input of pair tasks)
  at::Tensor lengths;        // [B] int64
  std::int64_t max_positions = 0;  // the longest sequence the model has positions for
  std::string description;   // for messages
};
// Sequences truncated or zero-padded to `length` (lengths clamped), through layer 0, no grad.
AttentionInputs model_inputs(ModelSource& source, std::int64_t length, const c10::Device& device);

struct DataOptions {
  std::vector<std::pair<std::string, std::string>> dataset_params;  // KEY=VALUE overrides
  std::string cache_dir;   // "" = dataset_cache_dir()
  std::int64_t batch = 8;  // sequences from the test split (the first ones)
  std::int64_t max_length = 0;  // the longest length asked for (the dataset's max_len when it has one)
};
// A freshly initialised LRA model (default [model] settings, torch::manual_seed(seed)) for `dataset`.
ModelSource init_source(const PluginRegistry& registry, const std::string& dataset, const DataOptions& data,
                        std::uint64_t seed, const c10::Device& device);
// The best checkpoint of a stored run, rebuilt from its job's configuration, on its dataset.
ModelSource run_source(const PluginRegistry& registry, store::ResultsReader& db, std::int64_t run_id,
                       const DataOptions& data, const c10::Device& device);

}  // namespace attnlab
