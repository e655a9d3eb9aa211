#include "sparkctl/fabric/roce_qos.h"

#include <sstream>

#include "base/strings.h"
#include "sparkctl/ssh/transport.h"

namespace spark::fabric {
namespace {

std::string Knob(const std::string& netdev, const char* point) {
  return "/sys/class/net/" + netdev + "/ecn/" + point + "/enable/" + std::to_string(kRocePriority);
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Reads one netdev's section ("@@pfc", "@@trust", "@@app", "@@np", "@@rp" lines follow).
void ParseSection(const std::string& key, const std::string& value, QosState* s) {
  s->raw += key + ": " + value + "; ";
  const std::string prio = std::to_string(kRocePriority);
  if (key == "pfc") {
    // "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off"
    for (const auto& w : Words(value)) {
      if (w == prio + ":on") s->pfc = true;
      else if (w.size() > 3 && w.substr(w.size() - 3) == ":on") s->pfc_others = true;
    }
  } else if (key == "trust") {
    // "order: dscp" (first selector wins)
    std::vector<std::string> w = Words(value);
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      if (w[i] == "order" || w[i] == "order:") {
        s->trust_dscp = w[i + 1] == "dscp";
        break;
      }
    }
  } else if (key == "app") {
    for (const auto& w : Words(value)) {
      if (w == std::to_string(kRoceDscp) + ":" + prio) s->dscp_prio = true;
    }
  } else if (key == "np") {
    s->ecn_np = value == "1";
  } else if (key == "rp") {
    s->ecn_rp = value == "1";
  }
}

}  // namespace

std::string QosState::Missing() const {
  if (!read) return "not read";
  std::vector<std::string> m;
  const std::string p = std::to_string(kRocePriority);
  if (!pfc) m.push_back("PFC off on priority " + p);
  if (pfc_others) m.push_back("PFC on other priorities too");
  if (!trust_dscp) m.push_back("trust is not DSCP");
  if (!dscp_prio) m.push_back("DSCP " + std::to_string(kRoceDscp) + " not mapped to priority " + p);
  if (!ecn_np) m.push_back("ECN notification point off");
  if (!ecn_rp) m.push_back("ECN reaction point off");
  return Join(m, ", ");
}

std::string QosProbeCommand(const std::vector<std::string>& netdevs) {
  std::string c;
  for (const auto& d : netdevs) {
    const std::string q = ssh::ShellQuote(d);
    c += "echo \"@@dev " + d + "\"; "
         "echo \"@@pfc $(dcb pfc show dev " + q + " prio-pfc 2>&1)\"; "
         "echo \"@@trust $(dcb apptrust show dev " + q + " order 2>&1)\"; "
         "echo \"@@app $(dcb app show dev " + q + " dscp-prio 2>&1)\"; "
         "echo \"@@np $(cat " + Knob(d, "roce_np") + " 2>&1)\"; "
         "echo \"@@rp $(cat " + Knob(d, "roce_rp") + " 2>&1)\"; ";
  }
  return c + "true";
}

std::vector<QosState> ParseQosProbe(const std::vector<std::string>& netdevs,
                                    const std::string& output) {
  std::vector<QosState> out;
  for (const auto& d : netdevs) out.push_back({.netdev = d});
  QosState* cur = nullptr;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("@@", 0) != 0) continue;
    size_t sp = line.find(' ');
    std::string key = line.substr(2, sp == std::string::npos ? std::string::npos : sp - 2);
    std::string value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "dev") {
      cur = nullptr;
      for (auto& s : out) {
        if (s.netdev == value) cur = &s;
      }
      if (cur) cur->read = true;
    } else if (cur) {
      ParseSection(key, value, cur);
    }
  }
  return out;
}

std::string QosApplyCommands(const std::vector<std::string>& netdevs) {
  const std::string p = std::to_string(kRocePriority);
  std::string c;
  for (const auto& d : netdevs) {
    const std::string q = ssh::ShellQuote(d);
    c += "dcb pfc set dev " + q + " prio-pfc all:off " + p + ":on\n";
    c += "dcb apptrust set dev " + q + " order dscp\n";
    c += "dcb app replace dev " + q + " dscp-prio " + std::to_string(kRoceDscp) + ":" + p + "\n";
    c += "echo 1 > " + Knob(d, "roce_np") + "\n";
    c += "echo 1 > " + Knob(d, "roce_rp") + "\n";
  }
  return c;
}

std::string QosResetCommands(const std::vector<std::string>& netdevs) {
  std::string c;
  for (const auto& d : netdevs) {
    const std::string q = ssh::ShellQuote(d);
    c += "dcb pfc set dev " + q + " prio-pfc all:off 2>/dev/null || true\n";
    c += "dcb app flush dev " + q + " dscp-prio 2>/dev/null || true\n";
    c += "dcb apptrust set dev " + q + " order pcp 2>/dev/null || true\n";
    c += "echo 0 2>/dev/null > " + Knob(d, "roce_np") + " || true\n";
    c += "echo 0 2>/dev/null > " + Knob(d, "roce_rp") + " || true\n";
  }
  return c;
}

}  // namespace spark::fabric
