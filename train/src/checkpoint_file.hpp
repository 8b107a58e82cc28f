#pragma once
// Checkpoint files (resume checkpoints, best-validation weights): written whole or not at all,
// checksummed, and a write that fails (a full disk) is one exception naming the file and the
// error, never an abort from inside LibTorch's writer.
#include <string>

#include <c10/core/Device.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

namespace attnlab::checkpoint_file {

// Writes `archive` to PATH.partial.PID, syncs it, renames it over `path` and syncs the folder: a
// crash leaves the previous file or the new one. Returns the checksum of the bytes written
// (checksum_text of attnlab::Checksum). CheckpointWriteError (trainer.hpp) when a write fails;
// the partial file is removed then.
std::string write(torch::serialize::OutputArchive& archive, const std::string& path);

// Reads `path` into `archive` on `device`, first checking that its bytes have the checksum
// `expected` (not checked when empty). Throws std::runtime_error in one line: "is unreadable
// (...)" for a file LibTorch cannot read, "is damaged (checksum X, recorded Y)" for a mismatch.
void read(const std::string& path, const std::string& expected, c10::Device device,
          torch::serialize::InputArchive& archive);

}  // namespace attnlab::checkpoint_file
