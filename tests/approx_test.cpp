// attnlab approx: the .npy reader and each file it refuses, the spectral-norm error on hand-computed
// cases, softmax against itself, a key-subsampling test plugin (tests/plugins/approx_keysample.cpp),
// and the command end to end (--qkv, --dataset listops, --run) with the rows it stores.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/linalg_eigvalsh.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include "studies/approx.hpp"
#include "studies/npy.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab {
namespace {
namespace fs = std::filesystem;

// --- fixtures --------------------------------------------------------------------------------------

struct TempDir {
  fs::path dir;
  TempDir() {
    dir = fs::temp_directory_path() / ("attnlab-approx-" + std::to_string(getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A .npy file as NumPy writes it: magic, version, header length (2 bytes in 1.0, 4 in 2.0/3.0),
// the dict padded with spaces to a multiple of 64 and ended by '\n', then the raw data.
std::string npy_bytes(const std::string& dict, const std::string& data, int version = 1) {
  const std::size_t prefix = version == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(version) + '\0';
  const auto len = static_cast<std::uint32_t>(header.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (version != 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  return out + header + data;
}

std::string tensor_bytes(const at::Tensor& t) {
  const auto c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<std::size_t>(c.numel() * c.element_size()));
}

std::string dict_for(const at::Tensor& t) {
  std::vector<std::int64_t> shape = t.sizes().vec();
  return std::string("{'descr': '") + (t.scalar_type() == at::kDouble ? "<f8" : "<f4") +
         "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
}

void write_npy(const std::string& path, const at::Tensor& t, int version = 1) {
  write_bytes(path, npy_bytes(dict_for(t), tensor_bytes(t), version));
}

// Writes q, k, v to `dir`; returns them.
std::vector<at::Tensor> write_qkv(const std::string& dir, std::vector<std::int64_t> shape, at::ScalarType dtype, std::uint64_t seed) {
  fs::create_directories(dir);
  at::manual_seed(seed);
  std::vector<at::Tensor> out;
  for (const char* name : {"q.npy", "k.npy", "v.npy"}) {
    out.push_back(at::randn(shape, at::TensorOptions().dtype(dtype)));
    write_npy((fs::path(dir) / name).string(), out.back());
  }
  return out;
}

// The message of the NpyError `fn` throws ("" if none).
template <typename Fn>
std::string npy_error(Fn fn) {
  try {
    fn();
  } catch (const NpyError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

// --- the .npy reader -------------------------------------------------------------------------------

TEST(Npy, ReadsFloat32AndFloat64OfRankThreeAndFourInEveryVersion) {
  TempDir t;
  const auto f4 = at::arange(2 * 3 * 4, at::TensorOptions().dtype(at::kFloat)).reshape({2, 3, 4}) / 7.0;
  const auto f8 = at::arange(2 * 2 * 3 * 2, at::TensorOptions().dtype(at::kDouble)).reshape({2, 2, 3, 2}) / 3.0;
  for (int version : {1, 2, 3}) {
    write_npy(t.path("a.npy"), f4, version);
    NpyHeader h;
    const auto a = read_npy(t.path("a.npy"), &h);
    EXPECT_EQ(h.major, version);
    EXPECT_EQ(h.descr, "<f4");
    EXPECT_EQ(a.scalar_type(), at::kFloat);
    EXPECT_EQ(a.sizes().vec(), (std::vector<std::int64_t>{2, 3, 4}));
    EXPECT_TRUE(at::equal(a, f4));

    write_npy(t.path("b.npy"), f8, version);
    const auto b = read_npy(t.path("b.npy"), &h);
    EXPECT_EQ(h.descr, "<f8");
    EXPECT_EQ(b.scalar_type(), at::kDouble);
    EXPECT_EQ(b.sizes().vec(), (std::vector<std::int64_t>{2, 2, 3, 2}));
    EXPECT_TRUE(at::equal(b, f8));
  }
}

TEST(Npy, HeaderVariantsNumPyWrites) {
  // double quotes, keys in another order, no trailing comma, a one-element tuple, Python 2's 3L
  const auto h = parse_npy_header_dict("{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"<f8\"}  \n", "x.npy");
  EXPECT_EQ(h.descr, "<f8");
  EXPECT_EQ(h.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(parse_npy_header_dict("{'descr':'<f4','fortran_order':False,'shape':()}", "x.npy").shape.size(), 0u);
}

TEST(Npy, EveryMalformedFileIsOneErrorNamingTheFileAndWhatWasExpected) {
  TempDir t;
  const auto x = at::ones({2, 3}, at::TensorOptions().dtype(at::kFloat));
  const std::string good = npy_bytes(dict_for(x), tensor_bytes(x));
  const std::string f = t.path("bad.npy");
  auto error_of = [&](const std::string& bytes) {
    write_bytes(f, bytes);
    return npy_error([&] { read_npy(f); });
  };

  std::string e = npy_error([&] { read_npy(t.path("missing.npy")); });
  EXPECT_HAS(e, t.path("missing.npy") + ": no such file");

  e = error_of("PK\x03\x04 not numpy at all");
  EXPECT_HAS(e, f + ": not a .npy file (expected the magic string \\x93NUMPY");
  e = error_of("");
  EXPECT_HAS(e, f + ": not a .npy file");

  e = error_of(std::string("\x93NUMPY", 6) + '\x04' + '\0' + "xx");
  EXPECT_HAS(e, f + ": .npy format version 4.0 is not supported (expected 1.0, 2.0 or 3.0)");

  e = error_of(std::string("\x93NUMPY", 6) + '\x01' + '\0' + '\x05');
  EXPECT_HAS(e, f + ": truncated header");
  e = error_of(good.substr(0, 40));  // the length field says 118 bytes of header
  EXPECT_HAS(e, f + ": truncated header: it declares");

  e = error_of(good.substr(0, good.size() - 3));
  EXPECT_HAS(e, f + ": truncated data: shape (2, 3) of '<f4' needs 24 bytes after the header, the file has 21");
  e = error_of(good + "xyz");
  EXPECT_HAS(e, f + ": unexpected data");

  e = error_of(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", std::string(24, '\0')));
  EXPECT_HAS(e, f + ": unsupported dtype '<i4' (expected '<f4' or '<f8'");
  e = error_of(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", std::string(24, '\0')));
  EXPECT_HAS(e, f + ": unsupported dtype '>f4'");
  e = error_of(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')));
  EXPECT_HAS(e, f + ": unsupported dtype [('a', '<f4')]");

  e = error_of(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", tensor_bytes(x)));
  EXPECT_HAS(e, f + ": fortran_order is True (expected False");

  e = error_of(npy_bytes("{'descr': '<f4', 'shape': (2, 3), }", tensor_bytes(x)));
  EXPECT_HAS(e, f + ": malformed header: no 'fortran_order' key");
  e = error_of(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }", tensor_bytes(x)));
  EXPECT_HAS(e, f + ": malformed header: unexpected key 'extra'");
  e = error_of(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", tensor_bytes(x)));
  EXPECT_HAS(e, f + ": malformed header: expected a non-negative integer");
  e = error_of(npy_bytes("['descr', '<f4']", tensor_bytes(x)));
  EXPECT_HAS(e, f + ": malformed header: expected '{'");
}

TEST(Npy, QkvFolderChecksRankAndMatchingShapes) {
  TempDir t;
  const std::string dir = t.path("qkv");
  write_qkv(dir, {2, 5, 3}, at::kDouble, 1);
  const auto in = npy_inputs(dir);
  EXPECT_EQ(in.q.sizes().vec(), (std::vector<std::int64_t>{1, 2, 5, 3}));  // [H, n, p] -> one sequence
  EXPECT_EQ(in.q.scalar_type(), at::kFloat);
  EXPECT_EQ(in.key_valid.sizes().vec(), (std::vector<std::int64_t>{1, 5}));
  EXPECT_TRUE(in.key_valid.all().item<bool>());

  write_npy(dir + "/v.npy", at::zeros({2, 5, 4}));
  std::string e = npy_error([&] { npy_inputs(dir); });
  EXPECT_HAS(e, dir + "/v.npy: shape (2, 5, 4) does not match q.npy's (2, 5, 3)");

  write_npy(dir + "/k.npy", at::zeros({5, 3}));
  e = npy_error([&] { npy_inputs(dir); });
  EXPECT_HAS(e, dir + "/k.npy: shape (5, 3) has rank 2 (expected [H, n, p] or [B, H, n, p])");

  fs::remove(dir + "/k.npy");
  e = npy_error([&] { npy_inputs(dir); });
  EXPECT_HAS(e, dir + "/k.npy: no such file");

  e = npy_error([&] { npy_inputs(t.path("nowhere")); });
  EXPECT_HAS(e, t.path("nowhere") + ": no such directory");
}

// --- the numbers -----------------------------------------------------------------------------------

TEST(ApproxNumerics, SpectralNormOfADiagonalDifference) {
  // exact = diag(2, 1, 1) over 4 x 3 rows; approx = exact + diag(3, -5, 2): ||D||_2 = 5, ||E||_2 = 2
  auto exact = at::zeros({1, 1, 4, 3}, at::TensorOptions().dtype(at::kFloat));
  exact[0][0].slice(0, 0, 3).copy_(at::eye(3) * at::tensor({2.0f, 1.0f, 1.0f}).unsqueeze(0));
  auto approx = exact.clone();
  approx[0][0][0][0] += 3;
  approx[0][0][1][1] -= 5;
  approx[0][0][2][2] += 2;
  const auto all_rows = at::ones({1, 4}, at::TensorOptions().dtype(at::kBool));
  auto norms = approximation_norms(approx, exact, all_rows);
  EXPECT_EQ(norms.error.scalar_type(), at::kDouble);
  EXPECT_NEAR(norms.error.item<double>(), 5.0, 1e-12);
  EXPECT_NEAR(norms.exact.item<double>(), 2.0, 1e-12);

  // a padded query row never counts, whatever it holds (NaN included)
  approx[0][0][3][0] = std::numeric_limits<float>::quiet_NaN();
  exact[0][0][3][2] = 100;
  auto rows = all_rows.clone();
  rows[0][3] = false;
  norms = approximation_norms(approx, exact, rows);
  EXPECT_NEAR(norms.error.item<double>(), 5.0, 1e-12);
  EXPECT_NEAR(norms.exact.item<double>(), 2.0, 1e-12);
  // and leaving row 1 out drops the -5
  rows[0][1] = false;
  EXPECT_NEAR(approximation_norms(approx, exact, rows).error.item<double>(), 3.0, 1e-12);

  // agrees with the largest singular value of a dense matrix
  at::manual_seed(3);
  const auto m = at::randn({2, 3, 7, 4}, at::TensorOptions().dtype(at::kDouble));
  const auto s = spectral_norms(m);
  EXPECT_EQ(s.sizes().vec(), (std::vector<std::int64_t>{2, 3}));
  const auto gram_top = std::sqrt(at::linalg_eigvalsh(m[1][2].transpose(0, 1).matmul(m[1][2])).max().item<double>());
  EXPECT_NEAR(s[1][2].item<double>(), gram_top, 1e-10);
}

TEST(ApproxNumerics, MeanAndSampleStandardDeviation) {
  const auto s = summarize({1, 2, 3, 4}, {0.5, 0.5, 0.5, 0.5});
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.abs_mean, 2.5);
  EXPECT_NEAR(s.abs_std, std::sqrt(5.0 / 3.0), 1e-15);
  EXPECT_DOUBLE_EQ(s.rel_mean, 0.5);
  EXPECT_DOUBLE_EQ(s.rel_std, 0.0);
  EXPECT_DOUBLE_EQ(summarize({7}, {1}).abs_std, 0.0);
  EXPECT_EQ(reference_for("skyformer", "auto"), "kernelized");
  EXPECT_EQ(reference_for("nystromformer", "auto"), "softmax");
  EXPECT_EQ(reference_for("skyformer", "softmax"), "softmax");
}

// --- the study through the library -----------------------------------------------------------------

struct Study : ::testing::Test {
  PluginRegistry registry;
  void SetUp() override { registry.load_folders(PluginRegistry::search_path({ATTNLAB_STUDY_PLUGIN_DIR})); }

  static AttentionInputs random_inputs(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t p) {
    at::manual_seed(11);
    const auto o = at::TensorOptions().dtype(at::kFloat);
    AttentionInputs in{at::randn({b, h, n, p}, o), at::randn({b, h, n, p}, o), at::randn({b, h, n, p}, o),
                       at::ones({b, n}, at::TensorOptions().dtype(at::kBool))};
    return in;
  }
  ApproxStudy study(std::vector<std::string> methods, std::vector<std::int64_t> features) const {
    ApproxStudy s;
    s.methods = std::move(methods);
    s.features = std::move(features);
    s.lengths = {16};
    s.draws = 3;
    s.seed = 5;
    s.source = "test";
    return s;
  }
};

TEST_F(Study, SoftmaxAgainstSoftmaxIsExactlyZero) {
  const auto in = random_inputs(2, 3, 16, 4);
  const auto rows = run_approx_study(study({"softmax"}, {4, 8}), registry, [&](std::int64_t) { return in; });
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.method, "softmax");
    EXPECT_EQ(r.reference, "softmax");
    EXPECT_EQ(r.param, "landmarks");
    EXPECT_EQ(r.seq_len, 16);
    EXPECT_EQ(r.samples, 6);  // 2 sequences x 3 heads, one evaluation: softmax is deterministic
    EXPECT_EQ(r.abs_error_mean, 0.0);
    EXPECT_EQ(r.abs_error_std, 0.0);
    EXPECT_EQ(r.rel_error_mean, 0.0);
    EXPECT_EQ(r.rel_error_std, 0.0);
    EXPECT_FALSE(r.torch_version.empty());
    EXPECT_FALSE(r.git_revision.empty());
  }
  EXPECT_EQ(rows[0].features, 4);
  EXPECT_EQ(rows[1].features, 8);
}

TEST_F(Study, KeySubsamplingErrorShrinksToZeroAndDrawsAreSeeded) {
  ASSERT_NE(registry.find(PluginKind::attention, "keysample"), nullptr) << "test plugin not built";
  const auto in = random_inputs(2, 2, 16, 4);
  auto s = study({"keysample"}, {2, 8, 16});
  const auto rows = run_approx_study(s, registry, [&](std::int64_t) { return in; });
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].samples, 2 * 2 * 3);  // sequences x heads x draws
  EXPECT_GT(rows[0].rel_error_mean, 0.05);
  EXPECT_GT(rows[0].rel_error_std, 0.0);
  EXPECT_GT(rows[0].rel_error_mean, rows[1].rel_error_mean);
  EXPECT_LT(rows[2].rel_error_mean, 1e-5);  // every key kept: softmax up to summation order
  EXPECT_GT(rows[0].abs_error_mean, 0.0);

  // the same seed gives the same numbers; another seed other draws
  const auto again = run_approx_study(s, registry, [&](std::int64_t) { return in; });
  EXPECT_EQ(again[0].abs_error_mean, rows[0].abs_error_mean);
  s.seed = 6;
  const auto other = run_approx_study(s, registry, [&](std::int64_t) { return in; });
  EXPECT_NE(other[0].abs_error_mean, rows[0].abs_error_mean);
}

TEST_F(Study, PaddedRowsAndKeysAreLeftOut) {
  // the second sequence has 10 real tokens of 16: what sits past them changes nothing
  auto in = random_inputs(2, 2, 16, 4);
  in.key_valid[1].slice(0, 10, 16).fill_(false);
  auto s = study({"keysample"}, {4});
  const auto a = run_approx_study(s, registry, [&](std::int64_t) { return in; });
  auto changed = in;
  changed.q = in.q.clone();
  changed.k = in.k.clone();
  changed.v = in.v.clone();
  changed.q[1].slice(1, 10, 16).fill_(1e3);
  changed.k[1].slice(1, 10, 16).fill_(-1e3);
  changed.v[1].slice(1, 10, 16).fill_(1e6);
  const auto b = run_approx_study(s, registry, [&](std::int64_t) { return changed; });
  EXPECT_NEAR(a[0].abs_error_mean, b[0].abs_error_mean, 1e-6 * a[0].abs_error_mean);
  EXPECT_TRUE(std::isfinite(a[0].rel_error_mean));
}

TEST_F(Study, RefusesAMethodWithoutTheParameterAndUnknownNames) {
  auto expect_error = [&](const ApproxStudy& s, const std::string& part) {
    try {
      check_study(s, registry);
      ADD_FAILURE() << "no error; expected: " << part;
    } catch (const ApproxError& e) {
      EXPECT_HAS(e.what(), part);
    }
  };
  auto s = study({"keysample"}, {4});
  s.param = "features";
  expect_error(s, "method 'keysample' has no parameter 'features' (its parameters: landmarks)");
  // softmax is its own reference (the exactness check): no parameter needed; against another
  // reference it needs one
  s = study({"softmax"}, {4});
  check_study(s, registry);
  s.exact = "kernelized";
  if (registry.find(PluginKind::attention, "kernelized")) expect_error(s, "method 'softmax' has no parameter 'landmarks'");
  else expect_error(s, "exact reference (for softmax) 'kernelized' is not a loaded attention plugin");
  expect_error(study({"nosuch"}, {4}), "method 'nosuch' is not a loaded attention plugin");
  s = study({"keysample"}, {0});
  expect_error(s, "--features 0: must be at least 1");
  s = study({"keysample"}, {4});
  s.method_params["keysample"] = {{"nope", "1"}};
  expect_error(s, "--method-param keysample.nope: method 'keysample' has no parameter 'nope'");
  s.method_params["keysample"] = {{"landmarks", "3"}};
  expect_error(s, "--method-param keysample.landmarks: 'landmarks' is what --features sets");
  s.method_params.clear();
  s.method_params["softmax"] = {{"dropout", "2"}};  // the reference: checked too
  expect_error(s, "--method-param softmax.dropout: dropout");
  s.method_params.clear();
  s.method_params["other"] = {{"x", "1"}};
  expect_error(s, "--method-param other.x: 'other' is neither a studied method nor an exact reference");
  s = study({"keysample"}, {4});
  s.exact = "exactest";
  expect_error(s, "--exact 'exactest': expected softmax, kernelized or auto");
}

TEST(ApproxTable, RowsAreMethodByLengthColumnsAreD) {
  std::vector<store::ApproxResult> rows;
  for (std::int64_t n : {64, 32})
    for (std::int64_t d : {8, 4}) {
      store::ApproxResult r;
      r.method = "m";
      r.reference = "softmax";
      r.source = "npy:x";
      r.param = "landmarks";
      r.features = d;
      r.seq_len = n;
      r.samples = 6;
      r.rel_error_mean = 0.125 * static_cast<double>(d);
      r.rel_error_std = 0.01;
      r.abs_error_mean = 2;
      r.abs_error_std = 0.5;
      r.device = "cpu";
      rows.push_back(r);
    }
  const std::string t = approx_table(rows, false);
  EXPECT_HAS(t, "source npy:x");
  EXPECT_HAS(t, "method  exact    n   samples  d=4         d=8\n");
  EXPECT_HAS(t, "m       softmax  32  6        0.5 ± 0.01  1 ± 0.01\n");
  EXPECT_LT(t.find("  32  "), t.find("  64  "));  // lengths in increasing order
  EXPECT_HAS(approx_table(rows, true), "2 ± 0.5");
}

// --- the command end to end ------------------------------------------------------------------------

struct ApproxCli : attnlab::testing::CliTest {
  std::string db() const { return path("r.db"); }
  std::string common() const {
    return "--db " + db() + " --threads 1 --plugins " + std::string(ATTNLAB_STUDY_PLUGIN_DIR) + " --cache-dir " + path("cache");
  }
  static std::string tiny_listops() {
    return " --dataset-param train_size=16 --dataset-param val_size=8 --dataset-param test_size=8"
           " --dataset-param max_depth=3 --dataset-param max_args=4 --dataset-param min_length=3 --dataset-param max_length=60";
  }

  std::string query(const std::string& sql) const { return attnlab::testing::query_one(db(), sql); }
};

TEST_F(ApproxCli, QkvFilesEndToEnd) {
  const std::string dir = path("qkv");
  write_qkv(dir, {2, 2, 16, 4}, at::kFloat, 7);  // [B, H, n, p]
  std::string out;
  ASSERT_EQ(attnlab("approx --methods softmax,keysample --qkv " + dir + " --features 2,16 --draws 2 " + common(), out), 0) << out;
  EXPECT_HAS(out, "source npy:" + dir);
  EXPECT_HAS(out, "d=2");
  EXPECT_HAS(out, "d=16");
  EXPECT_HAS(out, "keysample  softmax  16");
  EXPECT_HAS(out, "stored 4 row(s)");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE source = 'npy:" + dir + "' AND seq_len = 16 AND param = 'landmarks'"), "4");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE method = 'softmax' AND reference = 'softmax' AND abs_error_mean = 0 "
                  "AND rel_error_mean = 0 AND samples = 4"), "2");
  EXPECT_EQ(query("SELECT samples FROM approx_results WHERE method = 'keysample' AND features = 2"), "8");  // 2 x 2 x 2 draws
  EXPECT_EQ(query("SELECT rel_error_mean > 0.05 AND rel_error_std > 0 AND abs_error_mean > 0 FROM approx_results "
                  "WHERE method = 'keysample' AND features = 2"), "1");
  EXPECT_EQ(query("SELECT rel_error_mean < 1e-5 FROM approx_results WHERE method = 'keysample' AND features = 16"), "1");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE device = 'cpu' AND torch_version IS NOT NULL "
                  "AND git_revision IS NOT NULL AND created_at IS NOT NULL"), "4");

  // --lengths takes the first rows; longer than the files is refused
  ASSERT_EQ(attnlab("approx --methods keysample --qkv " + dir + " --lengths 8,12 --features 4 " + common(), out), 0) << out;
  EXPECT_EQ(query("SELECT group_concat(seq_len) FROM approx_results WHERE features = 4"), "8,12");
  EXPECT_EQ(attnlab("approx --methods keysample --qkv " + dir + " --lengths 32 --features 4 " + common(), out), 2) << out;
  EXPECT_HAS(out, "--lengths 32: the .npy files in " + dir + " have only 16 rows");

  // --show prints what is stored, relative or absolute
  ASSERT_EQ(attnlab("approx --show --db " + db(), out), 0) << out;
  EXPECT_HAS(out, "relative error");
  EXPECT_HAS(out, "softmax    softmax  16  4        0 ± 0");
  ASSERT_EQ(attnlab("approx --show --absolute --db " + db(), out), 0) << out;
  EXPECT_HAS(out, "absolute error");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results"), "6");
}

// A method written in PyTorch is studied by its file, as check, bench and run take it, at the
// files' shape: exact softmax as a script beside the native one, both exact; measured once (no
// parameter to vary), its row's parameter "script".
TEST_F(ApproxCli, ATorchScriptFileIsStudiedBesideItsNativePlugin) {
  const std::string dir = path("qkv");
  write_qkv(dir, {2, 3, 16, 4}, at::kFloat, 7);  // [B, H, n, p]: heads and head size of neither's defaults
  std::string out;
  ASSERT_EQ(attnlab("approx --methods softmax," + attnlab::testing::scripted_method("softmax_script") + " --qkv " + dir +
                        " --features 2,16 " + common(),
                    out),
            0)
      << out;
  EXPECT_HAS(out, "stored 3 row(s)");
  EXPECT_EQ(query("SELECT count(*) || ' ' || max(features) || ' ' || (max(rel_error_mean) < 1e-6) FROM approx_results "
                  "WHERE method = 'softmax_script' AND reference = 'softmax' AND param = 'script' AND seq_len = 16"),
            "1 0 1");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE method = 'softmax' AND rel_error_mean = 0"), "2");
  EXPECT_EQ(attnlab("approx --methods missing.pt --qkv " + dir + " " + common(), out), 2) << out;
  EXPECT_HAS(out, "approx: --methods: missing.pt: no such file");
}

TEST_F(ApproxCli, BadInputsAreOneLineErrorsAndStoreNothing) {
  const std::string dir = path("qkv");
  write_qkv(dir, {2, 8, 4}, at::kDouble, 1);  // [H, n, p], float64
  write_bytes(dir + "/k.npy", "not numpy");
  std::string out;
  EXPECT_EQ(attnlab("approx --methods softmax --qkv " + dir + " " + common(), out), 2);
  EXPECT_HAS(out, "attnlab: error: " + dir + "/k.npy: not a .npy file");
  EXPECT_EQ(attnlab("approx --methods keysample --qkv " + dir + " --param iterations " + common(), out), 2);
  EXPECT_HAS(out, "method 'keysample' has no parameter 'iterations' (its parameters: landmarks)");
  EXPECT_EQ(attnlab("approx --methods softmax " + common(), out), 2);
  EXPECT_HAS(out, "give exactly one of --dataset NAME, --run RUN_ID, --qkv DIR");
  EXPECT_EQ(attnlab("approx --methods softmax --qkv " + dir + " --dataset listops " + common(), out), 2);
  EXPECT_EQ(attnlab("approx --methods softmax --qkv " + dir + " --features 4,x " + common(), out), 2);
  EXPECT_HAS(out, "--features '4,x': expected positive integers separated by commas");
  EXPECT_FALSE(fs::exists(db()));
  EXPECT_EQ(attnlab("approx --show --db " + db(), out), 2);
  EXPECT_HAS(out, db() + ": no such database");
}

TEST_F(ApproxCli, FreshModelOnListOps) {
  std::string out;
  ASSERT_EQ(attnlab("approx --methods softmax,keysample --dataset listops --batch 2 --lengths 32,64 --features 4,8 --draws 2 --seed 3 " +
                        common() + tiny_listops(),
                    out),
            0)
      << out;
  EXPECT_HAS(out, "source init:listops");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE source = 'init:listops'"), "8");
  EXPECT_EQ(query("SELECT group_concat(DISTINCT seq_len) FROM approx_results"), "32,64");
  // the default model has 2 heads: 2 sequences x 2 heads, x 2 draws for the stochastic method
  EXPECT_EQ(query("SELECT group_concat(DISTINCT samples) FROM approx_results WHERE method = 'softmax'"), "4");
  EXPECT_EQ(query("SELECT group_concat(DISTINCT samples) FROM approx_results WHERE method = 'keysample'"), "8");
  EXPECT_EQ(query("SELECT max(abs_error_mean) FROM approx_results WHERE method = 'softmax'"), "0.0");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE method = 'keysample' AND rel_error_mean > 0 "
                  "AND rel_error_mean < 10"), "4");

  // the same seed gives the same numbers
  const std::string first = query("SELECT rel_error_mean FROM approx_results WHERE method = 'keysample' AND seq_len = 64 AND features = 4");
  ASSERT_EQ(attnlab("approx --methods keysample --dataset listops --batch 2 --lengths 64 --features 4 --draws 2 --seed 3 " + common() +
                        tiny_listops(),
                    out),
            0)
      << out;
  EXPECT_EQ(query("SELECT rel_error_mean FROM approx_results WHERE id = (SELECT max(id) FROM approx_results)"), first);
}

// approx reads --batch test sequences: the other splits of a generated dataset are built at their
// smallest (LRA ListOps would otherwise be generated whole, 100,000 trees and 635 MB, for 8), and
// it says so in one line.
TEST_F(ApproxCli, ADatasetSourceBuildsOnlyWhatItReads) {
  std::string out;
  ASSERT_EQ(attnlab("approx --methods softmax --dataset listops --batch 2 --lengths 32 --features 4 " + common() +
                        " --dataset-param test_size=8 --dataset-param max_depth=3 --dataset-param max_args=4"
                        " --dataset-param min_length=3 --dataset-param max_length=60",
                    out),
            0)
      << out;
  EXPECT_HAS(out, "approx: dataset listops: only its test split is read, so train_size = 1, val_size = 1 "
                  "(--dataset-param sets them)\n");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE source = 'init:listops'"), "1");
  std::uintmax_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(path("cache")))
    if (entry.is_regular_file()) bytes += entry.file_size();
  EXPECT_LT(bytes, 64u * 1024u) << "the default 96,000 training trees were generated";
}

TEST_F(ApproxCli, StoredRunCheckpoint) {
  const std::string toml = path("tiny.toml");
  std::ofstream(toml) << "[experiment]\nname = \"tiny\"\nseeds = [1]\n"
                      << "[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                      << "[train]\nsteps = 10\nbatch_size = 8\nlr = 0.002\nwarmup = 2\neval_every = 5\nlog_every = 5\n"
                      << "[methods.softmax]\n"
                      << "[datasets.listops]\nmax_len = 64\ntrain_size = 16\nval_size = 8\ntest_size = 8\n"
                      << "max_depth = 3\nmax_args = 4\nmin_length = 3\nmax_length = 60\n";
  std::string out;
  ASSERT_EQ(attnlab("run " + toml + " " + common(), out), 0) << out;
  ASSERT_EQ(attnlab("approx --methods softmax,keysample --run 1 --batch 3 --lengths 32,64 --features 4 " + common(), out), 0) << out;
  EXPECT_HAS(out, "source run:1");
  EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE source = 'run:1'"), "4");
  EXPECT_EQ(query("SELECT group_concat(DISTINCT samples) FROM approx_results WHERE method = 'softmax'"), "6");  // 3 x 2 heads
  EXPECT_EQ(query("SELECT max(abs_error_mean) FROM approx_results WHERE method = 'softmax'"), "0.0");

  // the run's model has positions for 64 tokens: an explicit longer length is refused, the
  // default lengths are cut to what fits
  EXPECT_EQ(attnlab("approx --methods softmax --run 1 --lengths 128 --features 4 " + common(), out), 2);
  EXPECT_HAS(out, "--lengths 128: run 1 (softmax/listops) has positions for 64 tokens only");
  ASSERT_EQ(attnlab("approx --methods softmax --run 1 --features 4 " + common(), out), 0) << out;
  EXPECT_EQ(query("SELECT seq_len FROM approx_results WHERE id = (SELECT max(id) FROM approx_results)"), "64");
  EXPECT_EQ(attnlab("approx --methods softmax --run 7 --features 4 " + common(), out), 2);
  EXPECT_HAS(out, "no run with id 7");
}

TEST_F(ApproxCli, RealMethodsWhenBuilt) {
  PluginRegistry registry;
  registry.load_folders(PluginRegistry::search_path({}));
  std::vector<std::string> present;
  for (const char* m : {"nystromformer", "skyformer"})
    if (registry.find(PluginKind::attention, m)) present.push_back(m);
  if (present.empty() || !registry.find(PluginKind::attention, "kernelized")) GTEST_SKIP() << "nystromformer/skyformer/kernelized not built";
  const std::string dir = path("qkv");
  write_qkv(dir, {2, 64, 8}, at::kFloat, 9);
  std::string methods;
  for (const auto& m : present) methods += (methods.empty() ? "" : ",") + m;
  std::string out;
  ASSERT_EQ(attnlab("approx --methods " + methods + " --qkv " + dir + " --features 8,16 " + common(), out), 0) << out;
  EXPECT_EQ(query("SELECT count(*) FROM approx_results"), std::to_string(2 * present.size()));
  if (registry.find(PluginKind::attention, "nystromformer")) {
    // without its convolution (not part of the approximation), stored under its own label
    ASSERT_EQ(attnlab("approx --methods nystromformer --qkv " + dir + " --features 64 --method-param nystromformer.conv_kernel=0 " + common(), out), 0) << out;
    EXPECT_EQ(query("SELECT rel_error_mean < 0.05 FROM approx_results WHERE method = 'nystromformer[conv_kernel=0]' AND features = 64"), "1") << out;
    EXPECT_HAS(out, "nystromformer[conv_kernel=0]");
  }
  for (const auto& m : present) {
    EXPECT_EQ(query("SELECT count(*) FROM approx_results WHERE method = '" + m + "' AND rel_error_mean >= 0 AND rel_error_mean < 1e3"), "2") << out;
    EXPECT_EQ(query("SELECT DISTINCT reference FROM approx_results WHERE method = '" + m + "'"), m == "skyformer" ? "kernelized" : "softmax");
  }
}

}  // namespace
}  // namespace attnlab
