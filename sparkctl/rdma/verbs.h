// The RDMA devices as libibverbs sees them on this machine (`spark-bench rdma-info`): each
// device is opened, port 1 queried (state, active MTU) and its GID table read. sysfs
// (/sys/class/infiniband, read by sparkctl/host's facts) lists devices the kernel knows; verbs
// additionally needs the uverbs character devices and a user-space provider, so a device can be
// listed in sysfs yet not be openable — VerbsReport says which, in words.
// Built without libibverbs (no rdma-core development files), ListVerbsDevices reports that
// instead of failing the build. Thread-safety: functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace spark::rdma {

struct VerbsPort {
  int port = 1;
  std::string state;   // "ACTIVE", "DOWN", "INIT", "ARMED"
  int active_mtu = 0;  // bytes
  std::vector<std::string> gids;  // index -> "fe80:0000:...", "" for an empty entry
};

struct VerbsDevice {
  std::string name;
  bool opened = false;
  std::string error;  // why it could not be opened or queried
  std::vector<VerbsPort> ports;
};

struct VerbsReport {
  bool built_with_verbs = false;  // this binary links libibverbs
  std::vector<VerbsDevice> devices;
  std::string note;  // "" or why there are no devices, with what to do

  bool AnyOpened() const;
};

VerbsReport ListVerbsDevices();

// `sysfs_devices` are the names /sys/class/infiniband lists. The sentence the selftest and
// `bench link` print when verbs cannot be used: names what is missing and says TCP is used.
std::string NoVerbsDeviceMessage(const VerbsReport& report,
                                 const std::vector<std::string>& sysfs_devices);

// ibv MTU enum (1..5) to bytes (256..4096); 0 for anything else.
int MtuEnumToBytes(int mtu_enum);

nlohmann::json ToJson(const VerbsReport& report);
// InvalidArgument naming the missing field.
Result<VerbsReport> VerbsReportFromJson(const nlohmann::json& json);

}  // namespace spark::rdma
