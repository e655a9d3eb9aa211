// The node-side halves of `sparkctl weights sync`: a tiny TCP file server
// (`sparkctl weights serve`) on a node that holds good files, and a fetcher
// (`sparkctl weights fetch`) on a node that needs one. The controller (sync.h) starts them over
// SSH; bytes go node to node, never through the controller.
//
// Wire protocol (one request per connection, TCP), authenticated with a per-sync key that the
// controller generates and hands to both sides over SSH (on the commands' stdin: never on a
// command line, in a file name or on the wire):
//   -> "SPARKCTL-SYNC/2 HELLO <client nonce>\n"
//   <- "CHALLENGE <server nonce> <HMAC(key, "server <client nonce> <server nonce>")>\n"
//   -> "<HMAC(key, "client <client nonce> <server nonce> <request>")> <request>\n"
//      request: "GET <offset> <relative path>" or "QUIT" (the server stops; sent when done)
//   <- "OK <file size>\n" then the file's bytes from <offset> to its end, or "ERR <message>\n"
// HMAC is HMAC-SHA-256 in hex; nonces are 128 random bits in hex. The server proves it holds
// the key before the client sends anything, so a host on the network that answers in its place
// is refused before a byte is written; a request without the key is refused before a file is
// opened. The bytes themselves are not encrypted (the model files are not secret) and not
// MAC'd: each file's SHA-256 comes from the manifest over SSH, and only a partial that matches
// it is renamed into place, so bytes injected into the stream can never become a shard.
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
inline constexpr size_t kMinKeyLength = 32;

// A new random key: 64 hex digits (256 bits from the system's CSPRNG).
std::string NewSyncKey();

// The key in the first line of `path` ("-": standard input, which is then closed so a detached
// server does not hold its SSH channel). InvalidArgument when shorter than kMinKeyLength,
// NotFound / PermissionDenied naming the file.
Result<std::string> ReadSyncKey(const std::string& path);

struct ServeOptions {
  std::string dir;                // files are served relative to it
  std::string bind = "0.0.0.0";   // address to listen on
  int port = kDefaultSyncPort;    // 0: any free port (reported through on_listening)
  std::string key;                // the sync's key (kMinKeyLength characters or more)
  // Exit after this long with no connection open (0: never): a server whose controller died
  // does not linger.
  std::chrono::seconds idle_exit{1800};
  uint64_t rate_limit = 0;  // bytes/s per connection, 0 = unlimited
  std::function<void(int port)> on_listening;  // called once the socket listens
  const std::atomic<bool>* stop = nullptr;     // another thread sets it: drop all and return
};

// Serves until QUIT, idle_exit or *stop. Unavailable when the port cannot be bound (names
// address, port and errno); InvalidArgument for a missing dir or a short key.
Status ServeFiles(const ServeOptions& options);

struct FetchOptions {
  std::string from;   // "HOST:PORT" of a ServeFiles
  std::string key;    // the server's key
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
// name untouched), FailedPrecondition (the server refused: unknown file, wrong key),
// PermissionDenied (the server could not prove it holds the key: nothing was written).
Result<FetchResult> FetchFile(const FetchOptions& options);

// Asks the server at "HOST:PORT" to stop. Unavailable when it cannot be reached.
Status SendQuit(const std::string& from, const std::string& key,
                std::chrono::milliseconds timeout = std::chrono::seconds(5));

// "<dir>/a/.b.bin.sparkctl-partial" for file "a/b.bin".
std::string PartialPath(const std::string& dir, const std::string& file);

// Splits "HOST:PORT" ("[v6]:PORT" too). InvalidArgument otherwise.
Result<std::pair<std::string, int>> ParseHostPort(std::string_view text);

}  // namespace spark::weights
