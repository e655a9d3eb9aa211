#include "engine/tokenizer/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace spark::tokenizer {
namespace {

void AppendString(const std::string& s, std::string& out) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

// Python's float repr: shortest round-trip digits; fixed notation when the decimal exponent is
// in [-4, 16), otherwise "d.ddde+XX".
void AppendFloat(double v, std::string& out) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "Infinity" : "-Infinity";
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, end);  // "-1.2345e+06"
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits = mantissa.substr(0, 1) + (mantissa.size() > 2 ? mantissa.substr(2) : "");
  if (negative) out.push_back('-');
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return;
  }
  out += mantissa;
  std::snprintf(buf, sizeof(buf), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  out += buf;
}

void Append(const nlohmann::ordered_json& v, std::string& out) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        AppendString(it.key(), out);
        out += ": ";
        Append(it.value(), out);
      }
      out.push_back('}');
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      out.push_back('[');
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += ", ";
        Append(v[i], out);
      }
      out.push_back(']');
      return;
    }
    case nlohmann::ordered_json::value_t::string: AppendString(v.get<std::string>(), out); return;
    case nlohmann::ordered_json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case nlohmann::ordered_json::value_t::number_float: AppendFloat(v.get<double>(), out); return;
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded: out += "null"; return;
    default: out += v.dump(); return;  // integers
  }
}

}  // namespace

std::string PyJsonDumps(const nlohmann::ordered_json& value) {
  std::string out;
  Append(value, out);
  return out;
}

}  // namespace spark::tokenizer
