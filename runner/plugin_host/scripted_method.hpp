#pragma once
// A TorchScript module as an attention method: a torch.nn.Module written in Python, scripted and
// saved as a .pt file (`torch.jit.script(m).save(...)`), trained, checked and measured as a compiled
// plugin is. What a script must be (forward's signature, parameters and buffers, the redraw idiom
// for random draws, the version note) is written down in plugins/README.md, "Methods in PyTorch".
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnlab/attention.hpp"

namespace attnlab {

// What is wrong with a script, in one line: "FILE: what".
struct ScriptError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The line of an error's text that says what went wrong: the last one of the TorchScript
// interpreter's (after its traceback; for an exception the script raised, "builtins.ValueError:
// what"), the first one of anything else (not its C++ backtrace).
std::string error_line(const std::exception& error);

// The module in `path` as the attention of one layer (each call loads its own copy: its own
// parameters). Refuses, with a ScriptError, a file that is not TorchScript, one scripted by a newer
// PyTorch than this build's LibTorch, a module whose forward is not
// forward(self, q: Tensor, k: Tensor, v: Tensor, key_valid: Tensor) -> Tensor, and one whose
// dropout has a constant training flag (torch.jit.trace's: it would never drop in training).
std::shared_ptr<AttentionMethod> load_scripted_attention(const std::string& path);

// The module's reset_parameters(), where it exports one, runs when it loads, drawing from the
// default CPU generator (seeded with the job's seed where a model is built). What is worth a
// warning about a file that loads, one line each: parameters (or buffers no redraw() fills) with
// no reset_parameters(), so that every layer and seed starts from the file's values; a file saved
// by torch.jit.trace (PyTorch 2 marks it; one whose dropout the trace froze is refused on load).
std::vector<std::string> scripted_warnings(const std::string& path);

// The script's `fixed_length: bool` attribute (False without one): True where its forward takes
// only sequences of the length it was made for, so that `check` runs every check at that length.
bool scripted_fixed_length(const std::string& path);

// Loads it and runs its forward once in eval mode on `batch` sequences (at least 2) of `shape`'s
// heads and head size and max_len tokens (at most 2048; the last sequence padded after 5/8 of
// them), redrawn first when it draws:
// a ScriptError for anything load_scripted_attention refuses, a forward that raises (the script's
// own message) or an output of another shape than q's. What `run`, `queue add`, `slurm submit`,
// `check` and `bench` ask of a scripted method before anything is stored or measured.
void check_scripted_attention(const std::string& path, const AttentionShape& shape, std::int64_t batch = 2);

}  // namespace attnlab
