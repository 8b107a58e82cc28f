#include "resume.hpp"

#include <mutex>
#include <sstream>
#include <stdexcept>

#include <ATen/Context.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "attnlab/params.hpp"
#include "checkpoint_file.hpp"

namespace attnlab::resume {
namespace {

constexpr const char* kFormat = "attnlab resume checkpoint";
constexpr std::int64_t kVersion = 1;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string real_text(double value) { return to_text(ParamValue(value)); }  // shortest round trip

// "name dtype [sizes]" per parameter, then per buffer: what the model's state must fit.
std::string shapes_of(const torch::nn::Module& model) {
  std::ostringstream out;
  auto line = [&](const char* kind, const std::string& name, const at::Tensor& t) {
    out << kind << ' ' << name << ' ' << t.dtype().name() << ' ' << t.sizes() << '\n';
  };
  for (const auto& p : model.named_parameters()) line("parameter", p.key(), p.value());
  for (const auto& b : model.named_buffers()) line("buffer", b.key(), b.value());
  return out.str();
}

// The first line where two texts differ, as "<here> here, <file> in the file".
std::string first_difference(const std::string& here, const std::string& file) {
  std::istringstream a(here), b(file);
  std::string x, y;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, x)), more_b = static_cast<bool>(std::getline(b, y));
    if (!more_a && !more_b) return "";
    if (!more_a) x = "(nothing)";
    if (!more_b) y = "(nothing)";
    if (x != y) return x + " here, " + y + " in the file";
  }
}

at::Generator default_generator(c10::Device device) {
  return at::globalContext().defaultGenerator(device.is_cuda() ? device : c10::Device(c10::kCPU));
}

at::Tensor generator_state(at::Generator generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_generator_state(at::Generator generator, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state.cpu());
}

// The accuracy marks reached, a line each: "MARK STEP CHECKSUM PATH" (the path last: it may hold spaces).
std::string marks_text(const std::vector<AccuracyMark>& marks) {
  std::ostringstream out;
  out.precision(17);
  for (const AccuracyMark& m : marks) out << m.mark << ' ' << m.step << ' ' << m.checksum << ' ' << m.path << '\n';
  return out.str();
}

// Reads from one checkpoint, every failure naming the file and the key.
class Reader {
 public:
  Reader(std::string path, torch::serialize::InputArchive& archive) : path_(std::move(path)), archive_(archive) {}

  [[noreturn]] void fail(const std::string& what) const { throw ResumeCheckpointError("resume checkpoint " + path_ + " " + what); }

  c10::IValue value(const std::string& key) const {
    c10::IValue v;
    if (!archive_.try_read(key, v)) fail("lacks '" + key + "' (not a resume checkpoint of this version?)");
    return v;
  }
  std::int64_t integer(const std::string& key) const {
    const auto v = value(key);
    if (!v.isInt()) fail("has a '" + key + "' that is not an integer");
    return v.toInt();
  }
  double real(const std::string& key) const {
    const auto v = value(key);
    if (!v.isDouble()) fail("has a '" + key + "' that is not a number");
    return v.toDouble();
  }
  std::string text(const std::string& key) const {
    const auto v = value(key);
    if (!v.isString()) fail("has a '" + key + "' that is not text");
    return v.toStringRef();
  }
  std::vector<AccuracyMark> marks(const std::string& text) const {
    std::vector<AccuracyMark> marks;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      AccuracyMark m;
      if (!(fields >> m.mark >> m.step >> m.checksum) || fields.get() != ' ' || !std::getline(fields, m.path) || m.path.empty())
        fail("has an accuracy mark line it cannot read: '" + line + "'");
      marks.push_back(std::move(m));
    }
    return marks;
  }
  at::Tensor tensor(const std::string& key) const {
    at::Tensor t;
    if (!archive_.try_read(key, t)) fail("lacks the tensor '" + key + "'");
    return t;
  }
  torch::serialize::InputArchive nested(const std::string& key) const {
    torch::serialize::InputArchive inner;
    if (!archive_.try_read(key, inner)) fail("lacks '" + key + "'");
    return inner;
  }

 private:
  std::string path_;
  torch::serialize::InputArchive& archive_;
};

}  // namespace

JobKey job_key(const TrainJob& job, std::int64_t train_examples) {
  const auto& m = job.model;
  const auto& t = job.train;
  std::ostringstream c;
  c << "model.layers=" << m.layers << "\nmodel.dim=" << m.dim << "\nmodel.ffn_dim=" << m.ffn_dim
    << "\nmodel.heads=" << m.heads << "\nmodel.head_dim=" << m.head_dim << "\nmodel.dropout=" << real_text(m.dropout)
    << "\nmodel.pooling=" << word(m.pooling) << "\nmodel.norm=" << word(m.norm) << "\nmodel.positions=" << word(m.positions)
    << "\ntrain.steps=" << t.steps << "\ntrain.batch_size=" << t.batch_size << "\ntrain.grad_accum=" << t.grad_accum
    << "\ntrain.lr=" << real_text(t.lr) << "\ntrain.weight_decay=" << real_text(t.weight_decay)
    << "\ntrain.beta1=" << real_text(t.beta1) << "\ntrain.beta2=" << real_text(t.beta2) << "\ntrain.eps=" << real_text(t.eps)
    << "\ntrain.warmup=" << t.warmup << "\ntrain.decay=" << word(t.decay) << "\ntrain.clip_norm=" << real_text(t.clip_norm)
    << "\ntrain.eval_every=" << t.eval_every << "\ntrain.eval_batches=" << t.eval_batches
    << "\ntrain.log_every=" << t.log_every << "\ntrain.instability_steps=" << t.instability_steps
    << "\ntrain.variance_passes=" << t.variance_passes << "\ntrain.variance_split=" << word(t.variance_split)
    << "\ntask.vocab_size=" << job.task.vocab_size << "\ntask.num_classes=" << job.task.num_classes
    << "\ntask.max_len=" << job.task.max_len << "\ntask.inputs=" << job.task.inputs
    << "\ntask.many_hot=" << job.task.many_hot << "\ndata.train_examples=" << train_examples << "\n";
  // later keys, away from their defaults only: checkpoints written before them stay resumable
  if (t.precision != "fp32") c << "train.precision=" << t.precision << "\n";
  if (t.tf32) c << "train.tf32=true\n";
  if (t.deterministic) c << "train.deterministic=true\n";
  if (t.clip_value != 0) c << "train.clip_value=" << real_text(t.clip_value) << "\n";
  if (t.keep_best_after != 0) c << "train.keep_best_after=" << real_text(t.keep_best_after) << "\n";
  if (t.eval_stream) c << "train.eval_draw=stream\n";
  if (t.test_drop_last) c << "train.test_drop_last=true\n";
  if (m.attention_precision != AttentionPrecision::autocast)
    c << "model.attention_precision=" << word(m.attention_precision) << "\n";
  if (m.zero_tokens_masked) c << "model.mask=nonzero_tokens\n";
  if (!m.attention_bias) c << "model.attention_bias=false\n";
  if (m.init != Init::standard) c << "model.init=" << word(m.init) << "\n";
  if (m.pair_head != PairHead::nli) c << "model.pair_head=" << word(m.pair_head) << "\n";
  return {job.identity, job.seed, c.str()};
}

std::string save(const std::string& path, const JobKey& key, const LoopState& loop, const Parts& parts) {
  torch::serialize::OutputArchive archive;
  archive.write("format", c10::IValue(std::string(kFormat)));
  archive.write("version", c10::IValue(kVersion));
  archive.write("identity", c10::IValue(key.identity));
  archive.write("seed", c10::IValue(static_cast<std::int64_t>(key.seed)));  // the same 64 bits
  archive.write("config", c10::IValue(key.config));
  archive.write("shapes", c10::IValue(shapes_of(parts.model)));

  // nested archives share the root's compilation unit, as Module::save's do
  torch::serialize::OutputArchive model(archive.compilation_unit()), optimizer(archive.compilation_unit()),
      best(archive.compilation_unit());
  parts.model.save(model);
  archive.write("model", model);
  parts.optimizer.save(optimizer);
  archive.write("optimizer", optimizer);
  best.write("count", c10::IValue(static_cast<std::int64_t>(loop.best_state.size())));
  for (std::size_t i = 0; i < loop.best_state.size(); ++i) best.write("t" + std::to_string(i), loop.best_state[i], true);
  archive.write("best_state", best);

  archive.write("steps_done", c10::IValue(loop.steps_done));
  archive.write("loss_sum", loop.loss_sum, true);
  archive.write("correct", loop.correct, true);
  archive.write("seen", c10::IValue(loop.seen));
  archive.write("micro_batches", c10::IValue(loop.micro_batches));
  archive.write("best_val", c10::IValue(loop.best_val));
  archive.write("best_step", c10::IValue(loop.best_step));
  archive.write("best_seen", c10::IValue(loop.best_seen));
  archive.write("last_val", c10::IValue(loop.last_val));
  archive.write("last_train_loss", c10::IValue(loop.last_train_loss));
  archive.write("last_train_acc", c10::IValue(loop.last_train_acc));
  archive.write("eval_seconds", c10::IValue(loop.eval_seconds));
  archive.write("elapsed_seconds", c10::IValue(loop.elapsed_seconds));
  if (loop.instability_ratio) archive.write("instability_ratio", c10::IValue(*loop.instability_ratio));
  archive.write("accuracy_marks", c10::IValue(marks_text(loop.marks)));
  archive.write("validation_pending", c10::IValue(loop.validation_pending));

  archive.write("rng_cpu", generator_state(default_generator(c10::Device(c10::kCPU))), true);
  if (parts.device.is_cuda()) archive.write("rng_cuda", generator_state(default_generator(parts.device)), true);
  archive.write("rng_attention", parts.draws.generator_state(), true);
  const auto data = parts.batches.state();
  archive.write("data_generator", data.generator, true);
  archive.write("data_order", data.order, true);
  archive.write("data_position", c10::IValue(data.position));
  archive.write("data_epoch", c10::IValue(data.epoch));
  if (parts.val_stream) {
    const auto val = parts.val_stream->state();
    archive.write("val_generator", val.generator, true);
    archive.write("val_order", val.order, true);
    archive.write("val_position", c10::IValue(val.position));
    archive.write("val_epoch", c10::IValue(val.epoch));
  }
  archive.write("loss_scale", c10::IValue(parts.scaler.current_scale()));
  archive.write("loss_scale_clean_steps", c10::IValue(parts.scaler.clean_steps()));
  archive.write("skipped_steps", c10::IValue(parts.scaler.skipped_steps()));

  return checkpoint_file::write(archive, path);
}

ValidationStart validation_start(const Parts& parts) {
  ValidationStart start;
  if (parts.val_stream) start.val_stream = parts.val_stream->state();
  start.rng_cpu = generator_state(default_generator(c10::Device(c10::kCPU)));
  if (parts.device.is_cuda()) start.rng_device = generator_state(default_generator(parts.device));
  return start;
}

void rewind(const ValidationStart& start, const Parts& parts) {
  if (start.val_stream) parts.val_stream->restore(*start.val_stream);
  set_generator_state(default_generator(c10::Device(c10::kCPU)), start.rng_cpu);
  if (start.rng_device.defined()) set_generator_state(default_generator(parts.device), start.rng_device);
}

LoopState load(const std::string& path, const Expected& expected, const JobKey& key, const Parts& parts) {
  torch::serialize::InputArchive archive;
  try {
    checkpoint_file::read(path, expected.checksum, parts.device, archive);
  } catch (const std::exception& e) {
    throw ResumeCheckpointError(std::string("resume checkpoint ") + e.what());
  }
  const Reader file(path, archive);
  c10::IValue format;
  if (!archive.try_read("format", format) || !format.isString() || format.toStringRef() != kFormat)
    file.fail("is not an attnlab resume checkpoint");
  if (const auto version = file.integer("version"); version != kVersion)
    file.fail("has format version " + std::to_string(version) + "; this build reads version " + std::to_string(kVersion));

  // whose checkpoint it is: checked before anything is restored
  if (const auto identity = file.text("identity"); identity != key.identity)
    file.fail("belongs to another job: identity '" + key.identity + "' here, '" + identity + "' in the file");
  if (const auto seed = static_cast<std::uint64_t>(file.integer("seed")); seed != key.seed)
    file.fail("belongs to another job: seed " + std::to_string(key.seed) + " here, " + std::to_string(seed) + " in the file");
  if (const auto difference = first_difference(key.config, file.text("config")); !difference.empty())
    file.fail("belongs to another job: " + difference);
  if (const auto difference = first_difference(shapes_of(parts.model), file.text("shapes")); !difference.empty())
    file.fail("does not fit this model: " + difference);

  LoopState loop;
  try {
    auto model = file.nested("model");
    parts.model.load(model);
    auto optimizer = file.nested("optimizer");
    parts.optimizer.load(optimizer);
    auto best = file.nested("best_state");
    const Reader best_reader(path, best);
    const auto count = best_reader.integer("count");
    for (std::int64_t i = 0; i < count; ++i) loop.best_state.push_back(best_reader.tensor("t" + std::to_string(i)));

    loop.steps_done = file.integer("steps_done");
    if (expected.steps_done >= 0 && loop.steps_done != expected.steps_done)
      file.fail("holds step " + std::to_string(loop.steps_done) + ", not step " + std::to_string(expected.steps_done) +
                " as recorded");
    loop.loss_sum = file.tensor("loss_sum");
    loop.correct = file.tensor("correct");
    loop.seen = file.integer("seen");
    loop.micro_batches = file.integer("micro_batches");
    loop.best_val = file.real("best_val");
    loop.best_step = file.integer("best_step");
    c10::IValue best_seen;  // a checkpoint from before keep_best_after kept every best it saw
    loop.best_seen = archive.try_read("best_seen", best_seen) ? best_seen.toDouble() : loop.best_val;
    loop.last_val = file.real("last_val");
    loop.last_train_loss = file.real("last_train_loss");
    loop.last_train_acc = file.real("last_train_acc");
    loop.eval_seconds = file.real("eval_seconds");
    loop.elapsed_seconds = file.real("elapsed_seconds");
    c10::IValue ratio;
    if (archive.try_read("instability_ratio", ratio)) loop.instability_ratio = ratio.toDouble();
    c10::IValue marks;  // none in a checkpoint from before accuracy marks were resumed
    if (archive.try_read("accuracy_marks", marks)) loop.marks = file.marks(marks.toStringRef());
    c10::IValue pending;  // none in a checkpoint from before a validation could be stopped
    loop.validation_pending = archive.try_read("validation_pending", pending) && pending.toBool();

    set_generator_state(default_generator(c10::Device(c10::kCPU)), file.tensor("rng_cpu"));
    at::Tensor cuda_state;
    // a checkpoint from another kind of device continues with this device's generator as seeded
    if (parts.device.is_cuda() && archive.try_read("rng_cuda", cuda_state))
      set_generator_state(default_generator(parts.device), cuda_state);
    parts.draws.set_generator_state(file.tensor("rng_attention").cpu());
    parts.batches.restore({file.tensor("data_generator").cpu(), file.tensor("data_order").cpu(),
                           file.integer("data_position"), file.integer("data_epoch")});
    if (parts.val_stream)  // the job key says eval_draw = "stream": the file has its position
      parts.val_stream->restore({file.tensor("val_generator").cpu(), file.tensor("val_order").cpu(),
                                 file.integer("val_position"), file.integer("val_epoch")});
    if (c10::IValue scale; archive.try_read("loss_scale", scale))
      parts.scaler.restore(scale.toDouble(), file.integer("loss_scale_clean_steps"), file.integer("skipped_steps"));
  } catch (const ResumeCheckpointError&) {
    throw;
  } catch (const std::exception& e) {
    file.fail("cannot be restored: " + first_line(e.what()));
  }
  return loop;
}

}  // namespace attnlab::resume
