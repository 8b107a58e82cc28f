#pragma once
// Pictures through gnuplot: a plot is written as a data file (OUT.dat) and a script (OUT.gp) next
// to the picture, then gnuplot runs the script. The three files stay: `cd DIR && gnuplot OUT.gp`
// draws the same picture again (the script names its files relative to its own folder).
#include <string>
#include <vector>

namespace attnlab::results {

enum class PictureFormat { png, svg };

// "png" | "svg"; anything else is a std::invalid_argument naming the word.
PictureFormat parse_picture_format(const std::string& word);
const char* to_string(PictureFormat format);

// One line of a plot, optionally with a band (low[i] .. high[i] around y[i]) drawn under it in
// the same colour. x, y (and low, high when given) have the same length; a NaN y is a gap.
struct Series {
  std::string title;
  std::vector<double> x, y;
  std::vector<double> low, high;  // both empty: no band
  // Its colour and dash pattern: palette entry `colour` (past the palette's end the colours repeat
  // with another dash pattern); -1: the series' position in the plot. A report gives each method
  // one number, so a method has the same colour in every picture whatever the others drawn.
  int colour = -1;
};

struct Plot {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool log_x = false, log_y = false;  // base 2 for x (sequence lengths), 10 for y
  bool marks = false;                 // a mark at every point (always for a series of one point)
};

// The data file and the script that go with a picture: OUT with its extension replaced by .dat
// and .gp ("fig/acc.png" -> "fig/acc.dat", "fig/acc.gp").
std::string data_path_for(const std::string& out_path);
std::string script_path_for(const std::string& out_path);

// The data file's text: a comment header naming every series, then one block per series (two
// blank lines apart, so that gnuplot's `index i` is series i), columns "x y" or "x y low high",
// numbers at %.17g (NaN as NaN).
std::string data_text(const Plot& plot);
// The gnuplot script that draws `plot` from `data_file` into `picture_file` (both as written in
// the script: names relative to the folder gnuplot runs in).
std::string script_text(const Plot& plot, const std::string& data_file, const std::string& picture_file,
                        PictureFormat format);

// Writes OUT.dat and OUT.gp, then runs gnuplot on the script (in OUT's folder, no shell between).
// Throws std::runtime_error, one line: gnuplot missing ("gnuplot not found on PATH: install
// gnuplot-nox, or use --format csv"), gnuplot failing (its error line), a plot with no series
// or with series of unequal lengths, a file that cannot be written.
void draw(const Plot& plot, const std::string& out_path, PictureFormat format);

}  // namespace attnlab::results
