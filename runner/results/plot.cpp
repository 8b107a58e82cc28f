#include "results/plot.hpp"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

extern char** environ;

namespace attnlab::results {
namespace fs = std::filesystem;
namespace {

// Distinguishable for colour-blind readers too (Okabe & Ito's palette, without its yellow, which
// is too pale on white); past its end the colours repeat with another dash pattern.
constexpr const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};
constexpr std::size_t kColourCount = sizeof kColours / sizeof kColours[0];

// A gnuplot single-quoted string: no escapes inside but '' for a quote; a line break would end
// the command, so it becomes a space.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "''";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out + "'";
}

std::string one_line(const std::string& text) {
  std::string out = text;
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Inf" : "-Inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}

void check(const Plot& plot) {
  const std::string what = "plot '" + one_line(plot.title) + "'";
  if (plot.series.empty()) throw std::runtime_error(what + ": no series to draw");
  for (const auto& s : plot.series) {
    const std::string which = what + ", series '" + one_line(s.title) + "'";
    if (s.x.empty()) throw std::runtime_error(which + ": no points");
    if (s.y.size() != s.x.size()) throw std::runtime_error(which + ": x and y differ in length");
    const bool band = !s.low.empty() || !s.high.empty();
    if (band && (s.low.size() != s.x.size() || s.high.size() != s.x.size()))
      throw std::runtime_error(which + ": its band's low and high must be as long as x");
  }
  // gnuplot would stop with "all points y value undefined": say it in our words.
  for (const auto& s : plot.series)
    for (const double y : s.y)
      if (std::isfinite(y)) return;
  throw std::runtime_error(what + ": nothing to draw, every y value is NaN or infinite");
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  if (out) out.close();
  if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

// The line of gnuplot's stderr that says what went wrong: its last non-blank one (gnuplot echoes
// the offending command and a caret first, and stops at the first error).
std::string error_line(const std::string& err) {
  std::string last;
  std::size_t begin = 0;
  while (begin < err.size()) {
    std::size_t end = err.find('\n', begin);
    if (end == std::string::npos) end = err.size();
    const std::string line = err.substr(begin, end - begin);
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
    begin = end + 1;
  }
  const auto first = last.find_first_not_of(" \t");
  return first == std::string::npos ? "" : last.substr(first, last.find_last_not_of(" \t\r") - first + 1);
}

// Runs `gnuplot -d SCRIPT` in `folder` (spawned directly: no shell to quote for), its stdin and
// stdout /dev/null, its stderr read back. -d: no ~/.gnuplot, so a user's settings cannot change
// the picture. Returns the exit status and stderr.
std::pair<int, std::string> run_gnuplot(const std::string& folder, const std::string& script) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw std::runtime_error(std::string("gnuplot: cannot make a pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  posix_spawn_file_actions_addchdir_np(&actions, folder.c_str());
  std::string program = "gnuplot", defaults = "-d", script_arg = script;
  char* argv[] = {program.data(), defaults.data(), script_arg.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    if (spawned == ENOENT) throw std::runtime_error("gnuplot not found on PATH: install gnuplot-nox, or use --format csv");
    throw std::runtime_error(std::string("cannot start gnuplot: ") + std::strerror(spawned));
  }
  std::string err;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) err.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return {128 + WTERMSIG(status), err};
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err};
}

}  // namespace

PictureFormat parse_picture_format(const std::string& word) {
  if (word == "png") return PictureFormat::png;
  if (word == "svg") return PictureFormat::svg;
  throw std::invalid_argument("unknown picture format '" + word + "' (png or svg)");
}

const char* to_string(PictureFormat format) { return format == PictureFormat::png ? "png" : "svg"; }

std::string data_path_for(const std::string& out_path) { return fs::path(out_path).replace_extension(".dat").string(); }
std::string script_path_for(const std::string& out_path) { return fs::path(out_path).replace_extension(".gp").string(); }

std::string data_text(const Plot& plot) {
  std::string text = "# attnlab plot data: " + one_line(plot.title) + "\n# x: " + one_line(plot.x_label) +
                     "; y: " + one_line(plot.y_label) + "\n";
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const Series& s = plot.series[i];
    text += "# index " + std::to_string(i) + ": " + one_line(s.title) +
            (s.low.empty() ? " (columns: x y)\n" : " (columns: x y low high)\n");
  }
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const Series& s = plot.series[i];
    text += "\n\n";  // two blank lines: the next gnuplot index
    for (std::size_t k = 0; k < s.x.size(); ++k) {
      text += number(s.x[k]) + " " + number(s.y[k]);
      if (!s.low.empty()) text += " " + number(s.low[k]) + " " + number(s.high[k]);
      text += "\n";
    }
  }
  return text;
}

std::string script_text(const Plot& plot, const std::string& data_file, const std::string& picture_file,
                        PictureFormat format) {
  std::string gp = "# attnlab: " + one_line(plot.title) + "\n# Draw again with: gnuplot " +
                   fs::path(picture_file).replace_extension(".gp").filename().string() + " (in this folder)\n";
  gp += "set encoding utf8\n";
  // noenhanced: titles such as softmax_lra are text, not subscripts.
  gp += format == PictureFormat::png ? "set terminal pngcairo size 800,500 noenhanced font 'sans,10'\n"
                                     : "set terminal svg size 800,500 dynamic noenhanced font 'sans,10' background rgb 'white'\n";
  gp += "set output " + quoted(picture_file) + "\n";
  gp += "set title " + quoted(plot.title) + "\n";
  gp += "set xlabel " + quoted(plot.x_label) + "\n";
  gp += "set ylabel " + quoted(plot.y_label) + "\n";
  gp += "set grid\n";
  // Under the plot, never over the lines.
  gp += "set key below Left reverse\n";
  gp += "set style fill transparent solid 0.2 noborder\n";
  if (plot.log_x) gp += "set logscale x 2\n";
  if (plot.log_y) gp += "set logscale y 10\n";
  // Marks at the axes' ends would be cut in half: leave a margin inside the frame.
  if (plot.marks) gp += "set autoscale fix\nset offsets graph 0.03, graph 0.03, graph 0.05, graph 0.05\n";

  // Bands first, so that every line is drawn over every band.
  std::vector<std::string> items;
  const std::string data = quoted(data_file);
  const auto palette_entry = [&](std::size_t i) {
    const int chosen = plot.series[i].colour;
    return chosen >= 0 ? static_cast<std::size_t>(chosen) : i;
  };
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    if (plot.series[i].low.empty()) continue;
    items.push_back(data + " index " + std::to_string(i) + " using 1:3:4 with filledcurves lc rgb '" +
                    kColours[palette_entry(i) % kColourCount] + "' notitle");
  }
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const Series& s = plot.series[i];
    const std::size_t c = palette_entry(i);
    const std::string colour = std::string("lc rgb '") + kColours[c % kColourCount] + "'";
    const std::string dashes = " dt " + std::to_string(1 + c / kColourCount);
    const std::string style = s.x.size() == 1 ? "with points pt 7 ps 1 " + colour
                              : plot.marks    ? "with linespoints lw 2 pt 7 ps 0.6 " + colour + dashes
                                              : "with lines lw 2 " + colour + dashes;
    items.push_back(data + " index " + std::to_string(i) + " using 1:2 " + style + " title " + quoted(s.title));
  }
  gp += "plot ";
  for (std::size_t i = 0; i < items.size(); ++i) gp += (i ? ", \\\n     " : "") + items[i];
  return gp + "\n";
}

void draw(const Plot& plot, const std::string& out_path, PictureFormat format) {
  check(plot);
  const fs::path out(out_path);
  const std::string extension = out.extension().string();
  if (extension == ".dat" || extension == ".gp")
    throw std::runtime_error("picture file " + out_path + ": its name cannot end in " + extension +
                             " (the data file and the script take .dat and .gp)");
  if (out.filename().empty()) throw std::runtime_error("picture file '" + out_path + "': not a file name");
  const std::string data_path = data_path_for(out_path), script_path = script_path_for(out_path);
  write_file(data_path, data_text(plot));
  // The script names its files relative to its own folder, where gnuplot runs.
  write_file(script_path, script_text(plot, fs::path(data_path).filename().string(), out.filename().string(), format));
  std::error_code ignored;
  fs::remove(out, ignored);  // so that a picture left by an earlier run cannot pass for this one

  const fs::path folder = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const auto [status, err] = run_gnuplot(folder.string(), fs::path(script_path).filename().string());
  if (status != 0) {
    fs::remove(out, ignored);  // gnuplot opened it before it failed: empty or partial
    const std::string line = error_line(err);
    throw std::runtime_error("gnuplot failed on " + script_path + " (exit status " + std::to_string(status) +
                             ")" + (line.empty() ? "" : ": " + line));
  }
  std::error_code ec;
  const auto size = fs::file_size(out, ec);
  if (ec || size == 0)
    throw std::runtime_error("gnuplot ran " + script_path + " but wrote no picture to " + out_path +
                             (error_line(err).empty() ? "" : ": " + error_line(err)));
}

}  // namespace attnlab::results
