#include "loadgen/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace k25::loadgen {

namespace {

const char* const kColors[] = {"#d4a017", "#7f8c8d", "#a0522d", "#1f77b4",
                               "#2ca02c", "#d62728", "#9467bd", "#17becf"};

std::string num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", x);
  return buffer;
}

std::string tick_label(double x) {
  char buffer[32];
  if (std::fabs(x) >= 1e5 || (std::fabs(x) < 1e-2 && x != 0)) {
    std::snprintf(buffer, sizeof buffer, "%.2g", x);
  } else {
    std::snprintf(buffer, sizeof buffer, "%g", x);
  }
  return buffer;
}

bool finite(const std::pair<double, double>& p) {
  return std::isfinite(p.first) && std::isfinite(p.second);
}

void render_chart(std::string& out, const Chart& chart, int top, int width, int height) {
  const double left = 70, right = width - 170, plot_top = top + 40, bottom = top + height - 50;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const PlotSeries& s : chart.series) {
    for (const auto& p : s.points) {
      if (!finite(p)) continue;
      x_lo = std::min(x_lo, p.first);
      x_hi = std::max(x_hi, p.first);
      y_lo = std::min(y_lo, p.second);
      y_hi = std::max(y_hi, p.second);
    }
  }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  x_lo = std::min(x_lo, 0.0);
  y_lo = std::min(y_lo, 0.0);
  const std::vector<double> x_ticks = nice_ticks(x_lo, x_hi), y_ticks = nice_ticks(y_lo, y_hi);
  x_hi = std::max(x_hi, x_ticks.back());
  y_hi = std::max(y_hi, y_ticks.back());
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  if (y_hi <= y_lo) y_hi = y_lo + 1;
  auto sx = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * (right - left); };
  auto sy = [&](double y) { return bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - plot_top); };

  out += "<text x=\"" + num(left) + "\" y=\"" + num(top + 24) +
         "\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(chart.title) + "</text>\n";
  out += "<rect x=\"" + num(left) + "\" y=\"" + num(plot_top) + "\" width=\"" + num(right - left) +
         "\" height=\"" + num(bottom - plot_top) + "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (double t : x_ticks) {
    out += "<line x1=\"" + num(sx(t)) + "\" y1=\"" + num(plot_top) + "\" x2=\"" + num(sx(t)) +
           "\" y2=\"" + num(bottom) + "\" stroke=\"#ddd\"/>\n";
    out += "<text x=\"" + num(sx(t)) + "\" y=\"" + num(bottom + 16) +
           "\" font-size=\"11\" text-anchor=\"middle\">" + tick_label(t) + "</text>\n";
  }
  for (double t : y_ticks) {
    out += "<line x1=\"" + num(left) + "\" y1=\"" + num(sy(t)) + "\" x2=\"" + num(right) +
           "\" y2=\"" + num(sy(t)) + "\" stroke=\"#ddd\"/>\n";
    out += "<text x=\"" + num(left - 6) + "\" y=\"" + num(sy(t) + 4) +
           "\" font-size=\"11\" text-anchor=\"end\">" + tick_label(t) + "</text>\n";
  }
  out += "<text x=\"" + num((left + right) / 2) + "\" y=\"" + num(bottom + 36) +
         "\" font-size=\"12\" text-anchor=\"middle\">" + xml_escape(chart.x_label) + "</text>\n";
  out += "<text x=\"16\" y=\"" + num((plot_top + bottom) / 2) +
         "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 16 " +
         num((plot_top + bottom) / 2) + ")\">" + xml_escape(chart.y_label) + "</text>\n";

  for (size_t i = 0; i < chart.series.size(); ++i) {
    const PlotSeries& s = chart.series[i];
    const std::string color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    if (s.dots) {
      for (const auto& p : s.points) {
        if (!finite(p)) continue;
        out += "<circle cx=\"" + num(sx(p.first)) + "\" cy=\"" + num(sy(p.second)) +
               "\" r=\"2.5\" fill=\"" + color + "\"/>\n";
      }
    } else {
      std::string coords;
      for (const auto& p : s.points) {
        if (!finite(p)) continue;
        coords += num(sx(p.first)) + "," + num(sy(p.second)) + " ";
      }
      if (!coords.empty()) {
        out += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\" points=\"" +
               coords + "\"/>\n";
      }
    }
    const double ly = plot_top + 10 + 18 * static_cast<double>(i);
    out += "<rect x=\"" + num(right + 14) + "\" y=\"" + num(ly - 9) +
           "\" width=\"12\" height=\"12\" fill=\"" + color + "\"/>\n";
    out += "<text x=\"" + num(right + 32) + "\" y=\"" + num(ly + 1) + "\" font-size=\"12\">" +
           xml_escape(s.name) + "</text>\n";
  }
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; t < hi + step * 0.999; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::vector<std::pair<double, double>> cdf_points(std::vector<double> values) {
  values.erase(
      std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
      values.end());
  std::sort(values.begin(), values.end());
  std::vector<std::pair<double, double>> points;
  const double n = static_cast<double>(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    points.emplace_back(values[i], static_cast<double>(i) / n);
    points.emplace_back(values[i], static_cast<double>(i + 1) / n);
  }
  return points;
}

std::string render_svg(const std::vector<Chart>& charts, int width, int chart_height) {
  const int height = chart_height * std::max<int>(1, static_cast<int>(charts.size()));
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         std::to_string(width) + "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " +
         std::to_string(width) + " " + std::to_string(height) + "\" font-family=\"sans-serif\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (size_t i = 0; i < charts.size(); ++i) {
    render_chart(out, charts[i], static_cast<int>(i) * chart_height, width, chart_height);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace k25::loadgen
