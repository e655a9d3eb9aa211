// Profile: the declarative description of one model served on one cluster shape
// (schema sparkctl-profile/v1, reference in docs/profiles.md).
//
// Plain structs with in-class defaults and one Validate(); parsing from YAML lives in
// profile_yaml.h, JSON rendering in profile_json.h. CLI flags override fields after loading and
// the result is validated again.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/field_errors.h"
#include "netplan/cluster_spec.h"

namespace spark::profile {

inline constexpr char kProfileSchema[] = "sparkctl-profile/v1";

struct ModelSpec {
  std::string repository;   // "deepseek-ai/DeepSeek-V4.1-Flash" (required)
  std::string revision;     // pinned commit, 7..40 hex digits (required)
  std::string path;         // where every node keeps its copy (required, absolute)
  std::string manifest;     // checksum manifest; relative paths are relative to the profile
  std::string served_name;  // name clients use in "model"; default: last part of repository
  double size_gib = 0;      // on-disk size, for DISK.FREE; 0 = take it from the manifest
  // Memory the loaded weights take on each node (tables kept on disk, such as DeepSeek-V4.1's
  // Engram, excluded); 0 = size_gib / topology.nodes. For MEMORY.HEADROOM.
  double resident_gib_per_node = 0;
};

struct TopologySpec {
  netplan::TopologyKind kind = netplan::TopologyKind::kSingle;
  int nodes = 1;
  int gpus_per_node = 1;
};

// A kernel that must not be used, with the reason and the fix preflight prints.
struct KernelDeny {
  std::string release;
  std::string reason;
  std::string fix;
};

struct HostSpec {
  std::vector<std::string> kernel_allow;  // empty: any kernel not denied
  std::vector<KernelDeny> kernel_deny;
  std::vector<std::string> kernel_cmdline;  // options `host pin` adds, e.g. "kho=off"
  int min_cma_mib = 64;                     // CMA.NONZERO fails below this
  std::string memlock = "unlimited";        // "unlimited" or a size in KiB
  double min_free_memory_gib = 8;           // MEMORY.HEADROOM after the model is loaded
};

enum class KvCacheDtype { kAuto, kFp8, kBf16, kFp16, kFp32 };

struct KvCacheSpec {
  KvCacheDtype dtype = KvCacheDtype::kAuto;
  // Exactly one of the two budgets: a token count per rank, or a fraction of the GPU memory
  // left after weights (never "all free memory": unified memory wedges the host when exhausted).
  std::optional<int64_t> tokens;
  std::optional<double> memory_fraction;
};

struct SpeculativeSpec {
  // none, ngram (prompt lookup, runs); mtp and dspark parse but are refused (not implemented).
  std::string method = "none";
  int num_speculative_tokens = 0;  // draft tokens per step (method != none)
  // ngram: longest and shortest suffix matched (given only with method ngram).
  std::optional<int> prompt_lookup_max;
  std::optional<int> prompt_lookup_min;
};

// The engine's memory guards (docs/memory.md), in GiB of memory a node keeps available: below
// startup_floor the engine refuses to start (and `up` / `profile check` refuse the profile's
// plan), below admit_floor it admits no new sequence, below hard_floor it fails waiting
// requests and the newest running one with 503. Defaults: a DGX Spark's (field practice: refuse
// to start below ~5 GiB, stop admitting below ~3 GiB).
struct MemoryGuardSpec {
  double startup_floor_gib = 5;
  double admit_floor_gib = 3;
  double hard_floor_gib = 1;
};

// The engine's collective choice by size (docs/comm.md): all-reduces and all-gathers up to
// oneshot_max_bytes through the one-shot transport over `wire`, larger ones through NCCL (Gloo
// on cpu). 0 = NCCL for everything.
struct CollectivesSpec {
  int64_t oneshot_max_bytes = 0;
  std::string wire = "socket";  // socket (TCP over the fabric) or rdma (RC verbs)
};

struct EngineSpec {
  std::string backend = "auto";  // auto (cuda when a GPU is present), cuda, cpu
  // Linear weights in memory: auto (the engine's choice: the checkpoint's type on cuda), fp32,
  // bf16 or fp8.
  std::string weight_dtype = "auto";
  // Greedy decode steps as CUDA graphs: unset = the engine's default (on for cuda),
  // true = --cuda-graphs, false = --no-cuda-graphs.
  std::optional<bool> cuda_graphs;
  int tp = 1;
  int64_t context_length = 32768;
  int max_running_requests = 8;
  KvCacheSpec kv_cache;
  int chunked_prefill = 2048;  // tokens per prefill chunk; 0 disables chunking
  bool prefix_caching = true;
  SpeculativeSpec speculative;
  std::string reasoning_parser;  // "" or a parser of the engine (spark-engine info)
  std::string tool_parser;       // "" or a parser of the engine (spark-engine info)
  MemoryGuardSpec memory_guard;
  CollectivesSpec collectives;
};

// HTTPS for the endpoint (paths on the node that serves it; docs/server.md "TLS").
struct TlsSpec {
  std::string cert;  // PEM certificate (chain); "" = plain HTTP
  std::string key;   // its unencrypted PEM key
  std::string ca;    // "" or PEM CAs whose client certificates are required (mutual TLS)
  bool enabled() const { return !cert.empty(); }
};

// Per-client-address limits of the endpoint (the engine's defaults; docs/server.md "Limits").
struct LimitsSpec {
  int max_connections = 1024;
  int max_connections_per_peer = 256;
  int max_requests_per_peer = 128;
};

struct ApiSpec {
  int port = 8000;
  std::string bind = "127.0.0.1";
  std::string key_file;  // required when bind is not a loopback address
  // max_tokens for a request that gives none (0: the engine's default, the rest of the context
  // for chat, 16 for completions), and the most a request may ask for (0: the context length).
  int default_max_tokens = 0;
  int max_tokens_limit = 0;
  TlsSpec tls;
  LimitsSpec limits;
};

// The quality reference `sparkctl check --quality` compares the served model with
// (docs/evaluation.md): the perplexity of `text` in windows of `context` tokens, and how far a
// measurement may stray from it.
struct QualitySpec {
  std::string text;        // the text file (required); relative paths are relative to the profile
  double perplexity = 0;   // the reference (required, > 0), e.g. from Hugging Face transformers
  double tolerance = 0.02; // relative: pass when |measured - perplexity| <= tolerance * perplexity
  int context = 512;       // tokens per window (2..engine.context_length)
};

struct Profile {
  std::string schema = kProfileSchema;
  std::string name;
  std::string description;
  ModelSpec model;
  TopologySpec topology;
  HostSpec host;
  EngineSpec engine;
  ApiSpec api;
  std::optional<QualitySpec> quality;      // none: `check --quality` says "no reference"
  std::map<std::string, std::string> env;  // extra environment for every engine rank

  std::string source_file;  // where it was loaded from (not part of the schema)
};

std::string_view KvCacheDtypeName(KvCacheDtype dtype);
std::optional<KvCacheDtype> ParseKvCacheDtype(std::string_view name);

// Fills derived defaults (served_name from repository). Idempotent.
void ApplyDefaults(Profile* profile);

// Checks ranges and cross-field rules (tp divides nodes x GPUs, topology node counts, exactly one
// KV budget, an API key for non-loopback binds, ...).
void Validate(const Profile& profile, FieldErrors* errors);

// The quality text's path (relative to the profile's file), or "" without a quality reference.
std::string ResolvedQualityText(const Profile& profile);

}  // namespace spark::profile
