// The node-side halves of `sparkctl weights sync`: a tiny TCP file server
// (`sparkctl weights serve`) on a node that holds good files, and a fetcher
// (`sparkctl weights fetch`) on a node that needs one. The controller (sync.h) starts them over
// SSH; bytes go node to node, never through the controller.
//
// Wire protocol (one request per connection, plain TCP):
//   -> "SPARKCTL-SYNC/1 GET <token> <offset> <relative path>\n"
//   <- "OK <file size>\n" then the file's bytes from <offset> to its end, or "ERR <message>\n"
//   -> "SPARKCTL-SYNC/1 QUIT <token>\n"   (the server stops; used by the controller when done)
// The token is a random string the controller gives both sides: it keeps a stray client (or a
// server left from another sync) from being used by mistake. It is not encryption: the
// management/fabric networks are trusted, as for NCCL.
//
// Safety of the receiver's data: bytes land in "<dir>/<parent>/.<name>.sparkctl-partial", which
// survives an interruption and is resumed from its size; only a partial whose SHA-256 matches the
// manifest is renamed (atomically) over the final name, and a final file that already matches is
// never touched.
// Thread-safety: ServeFiles runs one thread per connection and blocks its caller; FetchFile is
// reentrant (different files may be fetched concurrently).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::weights {

inline constexpr int kDefaultSyncPort = 51893;
inline constexpr std::string_view kPartialSuffix = ".sparkctl-partial";

struct ServeOptions {
  std::string dir;                // files are served relative to it
  std::string bind = "0.0.0.0";   // address to listen on
  int port = kDefaultSyncPort;    // 0: any free port (reported through on_listening)
  std::string token;              // required in every request; must not be empty
  // Exit after this long with no connection open (0: never): a server whose controller died
  // does not linger.
  std::chrono::seconds idle_exit{1800};
  uint64_t rate_limit = 0;  // bytes/s per connection, 0 = unlimited
  std::function<void(int port)> on_listening;  // called once the socket listens
  const std::atomic<bool>* stop = nullptr;     // another thread sets it: drop all and return
};

// Serves until QUIT, idle_exit or *stop. Unavailable when the port cannot be bound (names
// address, port and errno); InvalidArgument for a missing dir or an empty token.
Status ServeFiles(const ServeOptions& options);

struct FetchOptions {
  std::string from;   // "HOST:PORT" of a ServeFiles
  std::string token;
  std::string file;   // relative path, as in the manifest
  std::string dir;    // local model directory (created when missing)
  std::string sha256;  // expected, 64 hex digits
  uint64_t size = 0;   // expected
  // The server may still be starting: connecting is retried for this long.
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
};

struct FetchResult {
  std::string state;          // "already_ok" (nothing touched) or "fetched"
  uint64_t bytes_received = 0;
  uint64_t resumed_from = 0;  // bytes of an earlier partial that were kept
  double seconds = 0;
};

// Makes dir/file a verified copy. Errors name this host, the file, the source and the fix:
// ResourceExhausted (not enough free space: checked with statvfs before connecting, or ENOSPC),
// Unavailable (cannot connect, or the transfer broke: the partial is kept for a resume),
// DataLoss (the received bytes do not match the manifest: the partial is removed, the final
// name untouched), FailedPrecondition (the server refused: unknown file, bad token).
Result<FetchResult> FetchFile(const FetchOptions& options);

// Asks the server at "HOST:PORT" to stop. Unavailable when it cannot be reached.
Status SendQuit(const std::string& from, const std::string& token,
                std::chrono::milliseconds timeout = std::chrono::seconds(5));

// "<dir>/a/.b.bin.sparkctl-partial" for file "a/b.bin".
std::string PartialPath(const std::string& dir, const std::string& file);

// Splits "HOST:PORT" ("[v6]:PORT" too). InvalidArgument otherwise.
Result<std::pair<std::string, int>> ParseHostPort(std::string_view text);

}  // namespace spark::weights
