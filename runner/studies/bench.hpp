#pragma once
// attnlab bench: the time of one training step (forward, backward, AdamW step) and its peak memory,
// per attention method and sequence length, for the LRA model built for a dataset's task with
// random tokens. `attnlab bench` resolves the configurations and starts a fresh process
// (`attnlab bench-one`) per measurement on the CPU, per method on a GPU (every length in turn, the
// caching allocator emptied between them: a process start costs a CUDA context), which measures
// and stores each BenchResult itself: a crash costs that process's measurements only, and on the
// CPU the peak resident set is that measurement's own.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>

#include "attnlab/params.hpp"
#include "attnlab/store.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab {

class PluginRegistry;

// One measurement: everything that decides what is run.
struct BenchCase {
  std::string method, dataset;
  std::int64_t seq_len = 1024;
  std::int64_t batch_size = 4;
  std::int64_t steps = 5;   // timed steps
  std::int64_t warmup = 2;  // untimed steps before them
  std::int64_t seed = 1;    // weights, dropout, attention randomness, tokens and labels
  // The attention module's forward alone (no model, no backward) on q, k, v of the model's heads
  // and head width, as the precision's autocast hands them over: what a kernel's throughput is.
  bool attention_only = false;
  ParamValues model, train, method_params, dataset_params;  // train: the optimiser settings (lr, betas, eps, weight decay, clip norm)
};

// The resolved configuration as TOML: a job configuration (method, dataset, seed, [model], [train],
// [methods.M], [datasets.D]; read back by parse_job_config) followed by a [bench] table (seq_len,
// batch_size, steps, warmup, and attention_only when set). This is what the child process receives
// and what is stored.
std::string bench_config_toml(const BenchCase& c, const PluginRegistry& registry);
// The inverse; checks every value against the schemas. `where` names the text in errors.
BenchCase parse_bench_config(const std::string& toml, const std::string& where, const PluginRegistry& registry);

struct StepTimes {
  std::vector<double> seconds;          // one per timed step, waited for on the device
  std::vector<double> host_seconds;     // the same steps until the host had issued them (the CPU: the step)
  std::int64_t peak_memory_bytes = 0;   // CUDA allocator peak over the timed steps; CPU: this process's peak RSS
  std::int64_t ops = 0;                 // ops of one more step (StepProbes::count_ops), else 0
  std::string step_mode = "eager";      // StepRunner::mode() after the last step
};

// What a measurement looks at beside its timed steps, each in one more step of its own after them
// (counting and tracing slow every op down).
// `before_timing`, where set, is called between the warm-up and the timed steps: the processes of a
// packed measurement (bench --concurrent) wait there for each other, so that their timed steps overlap.
struct StepProbes {
  bool count_ops = false;  // the ops one step runs (OpCounter, studies/op_count.hpp)
  std::string trace;       // a Chrome trace of one step under LibTorch's profiler, written to this path
  std::function<void()> before_timing;
};

// Builds the model for the dataset's task at max_len = seq_len, then runs warm-up and timed training
// steps on seeded random tokens (every token real) and labels; then the probes' steps. Throws on
// failure (out of memory included). `device`: cpu, cuda, cuda:N. The trace holds every op the host
// ran, with its duration: what a host-bound step spends its time on.
StepTimes time_training_steps(const BenchCase& c, const PluginRegistry& registry, const std::string& device,
                              const std::string& cache_dir, const StepProbes& probes = {});
// With c.attention_only: warm-up and timed forward passes of one attention module (inference mode,
// autocast at [train] precision) on seeded q, k, v [batch, heads, seq_len, head_dim], every key real.
StepTimes time_attention_forward(const BenchCase& c, const PluginRegistry& registry, const std::string& device,
                                 const StepProbes& probes = {});

// Softmax attention's matmul FLOPs for one forward of a stored bench row: 4·B·H·N²·Dh (QKᵀ and PV,
// two FLOPs a multiply-add; the softmax itself not counted, as throughput figures usually do).
double softmax_attention_flops(const store::BenchResult& row);

// time_training_steps with the environment around it, as a row to store: status done, or oom /
// failed with the first line of the error. Never throws for a failed measurement.
// With `count_ops`, the row's ops_per_step; with a `trace_dir`, the traced step goes to
// <trace_dir>/<method>-<length>-<step|attention>-<precision>.json.
store::BenchResult run_bench_case(const BenchCase& c, const std::string& config_toml, const PluginRegistry& registry,
                                  const std::string& device, int threads, const std::string& cache_dir,
                                  bool count_ops = false, const std::string& trace_dir = "",
                                  const std::function<void()>& before_timing = {});

double median(std::vector<double> values);  // NaN when empty; mean of the middle two for an even count

// The measuring process's command line (`attnlab bench-one`), written by `attnlab bench` (to_args)
// and read by the process (options, from). It stores each measurement as it ends and appends the
// row's id to `stored_ids` (one per line): the parent reads back exactly its own rows, whatever
// else writes to the database meanwhile.
struct BenchOneOptions {
  std::string db_path;
  std::vector<std::string> config_tomls;  // bench_config_toml, one per measurement, in order
  std::string device = "cpu";
  int threads = 0;
  std::string cache_dir;
  std::vector<std::string> plugin_dirs;
  std::string stored_ids;  // file the ids are appended to
  bool count_ops = false;  // the ops of one more step per measurement (run_bench_case)
  std::int64_t concurrent = 1;  // measuring processes at once on the device, recorded in each row
  std::string barrier;     // with concurrent > 1: the folder where the processes wait for each other
  std::string trace_dir;   // a Chrome trace of one more step per measurement (run_bench_case)

  static boost::program_options::options_description options();
  static BenchOneOptions from(const boost::program_options::variables_map& vm);
  std::vector<std::string> to_args() const;  // the words after "bench-one" that from() reads back
};

// The results as a table: method, length, status, median step time, min-max, its ratio to softmax,
// peak memory, its ratio to softmax; a precision column once a row is not fp32, and once a row is
// an attention-only measurement a "part" column and softmax's TFLOP/s (softmax_attention_flops /
// time). Once a row was measured packed (bench --concurrent N): an "at once" column, the N
// processes' consecutive rows shown as one (the median of their medians), and "steps/s, all" (their
// 1 / median summed). The ratios compare a row with the softmax row measured with the same settings
// (dataset, length, batch, device, threads, LibTorch, model, processes at once) nearest to it.
// `context` adds when, dataset, batch, device and threads (for --show); `ops` the ops a step runs,
// their ratio to softmax's, and the host's time a step (bench --ops). Errors of rows that are not
// done follow the table, one line each.
std::string bench_table(const std::vector<store::BenchResult>& rows, bool context, bool ops = false);

}  // namespace attnlab
