// A small SVG writer for k25-bench: stacked x/y charts of lines or dots with axes, ticks and a
// legend. Standalone SVG 1.1, no scripts or external resources.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k25::loadgen {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are skipped
  bool dots = false;                              // scatter instead of a polyline
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
};

std::string render_svg(const std::vector<Chart>& charts, int width = 760, int chart_height = 340);

// The empirical CDF as a step line: (value, fraction of values <= value).
std::vector<std::pair<double, double>> cdf_points(std::vector<double> values);

// About `target` round tick values covering [lo, hi] (steps of 1, 2 or 5 times a power of ten).
std::vector<double> nice_ticks(double lo, double hi, int target = 6);

std::string xml_escape(std::string_view text);

}  // namespace k25::loadgen
