#include "engine/model/deepseek_v41/engram_hash.h"

#include <array>
#include <limits>
#include <set>

namespace spark::engine::model::dsv41 {
namespace {

using u128 = unsigned __int128;

// numpy's SeedSequence constants (bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd,
                   kMultB = 0x58f38ded, kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kPoolSize = 4;

uint32_t HashMix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  return value ^ (value >> 16);
}

uint32_t Mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  return r ^ (r >> 16);
}

// SeedSequence(seed).pool for a seed that fits one 32-bit word.
std::array<uint32_t, kPoolSize> SeedPool(uint32_t seed) {
  std::array<uint32_t, kPoolSize> pool{};
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) pool[i] = HashMix(i == 0 ? seed : 0, hash_const);
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool[dst] = Mix(pool[dst], HashMix(pool[src], hash_const));
    }
  }
  return pool;
}

// SeedSequence.generate_state(4, uint64).
std::array<uint64_t, 4> GenerateState(const std::array<uint32_t, kPoolSize>& pool) {
  std::array<uint32_t, 8> words{};
  uint32_t hash_const = kInitB;
  for (int i = 0; i < 8; ++i) {
    uint32_t v = pool[i % kPoolSize] ^ hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    words[i] = v ^ (v >> 16);
  }
  std::array<uint64_t, 4> out{};
  for (int i = 0; i < 4; ++i) out[i] = uint64_t{words[2 * i]} | (uint64_t{words[2 * i + 1]} << 32);
  return out;
}

class Pcg64 {
 public:
  explicit Pcg64(uint32_t seed) {
    const std::array<uint64_t, 4> s = GenerateState(SeedPool(seed));
    const u128 init_state = (u128{s[0]} << 64) | s[1];
    const u128 init_seq = (u128{s[2]} << 64) | s[3];
    inc_ = (init_seq << 1) | 1;
    Step();
    state_ += init_state;
    Step();
  }
  uint64_t Next() {
    Step();
    const uint64_t x = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
    const unsigned rot = static_cast<unsigned>(state_ >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
  }
  u128 state() const { return state_; }
  u128 inc() const { return inc_; }

 private:
  static constexpr u128 kMult = (u128{2549297995355413924ULL} << 64) | 4865540595714422341ULL;
  void Step() { state_ = state_ * kMult + inc_; }
  u128 state_ = 0, inc_ = 0;
};

// Lemire's nearly divisionless bounded draw in [0, range_excl) (numpy's bounded_lemire_uint64).
uint64_t Bounded(Pcg64& rng, uint64_t range_excl) {
  u128 m = u128{rng.Next()} * range_excl;
  uint64_t leftover = static_cast<uint64_t>(m);
  if (leftover < range_excl) {
    const uint64_t threshold = (0 - range_excl) % range_excl;
    while (leftover < threshold) {
      m = u128{rng.Next()} * range_excl;
      leftover = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

bool IsPrime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d) {
    if (n % d == 0) return false;
  }
  return true;
}

}  // namespace

std::vector<int64_t> NumpyIntegers(uint32_t seed, int64_t high, int count) {
  Pcg64 rng(seed);
  std::vector<int64_t> out(count);
  for (int i = 0; i < count; ++i) out[i] = static_cast<int64_t>(Bounded(rng, high));
  return out;
}

Pcg64Probe ProbePcg64(uint32_t seed, int outputs) {
  Pcg64 rng(seed);
  Pcg64Probe p{static_cast<uint64_t>(rng.state() >> 64),
               static_cast<uint64_t>(rng.state()),
               static_cast<uint64_t>(rng.inc() >> 64),
               static_cast<uint64_t>(rng.inc()),
               {}};
  for (int i = 0; i < outputs; ++i) p.first.push_back(rng.Next());
  return p;
}

Result<EngramHashing> EngramHashing::Create(const core::DeepseekV41Settings& s,
                                            int64_t pad_compressed) {
  EngramHashing h;
  h.max_ngram_ = s.engram_max_ngram_size;
  h.heads_ = s.engram_n_heads;
  h.pad_ = pad_compressed;
  const int64_t bound = std::max<int64_t>(
      1, std::numeric_limits<int64_t>::max() / s.engram_compressed_vocab_size / 2);
  if (bound <= (int64_t{1} << 32)) {
    return InvalidArgumentError(
        "engram_compressed_vocab_size = " + std::to_string(s.engram_compressed_vocab_size) +
        " is too large for the 64-bit multiplier draw");
  }
  std::set<int64_t> seen;
  for (int layer : s.engram_layer_ids) {
    std::vector<int64_t> mult =
        NumpyIntegers(static_cast<uint32_t>(10007 * layer), bound, h.max_ngram_);
    for (int64_t& m : mult) m = m * 2 + 1;
    h.multipliers_.push_back(std::move(mult));
    std::vector<int64_t> primes, offsets;
    int64_t total = 0;
    for (int n = 0; n < h.max_ngram_ - 1; ++n) {
      int64_t current = s.engram_vocab_size - 1;
      for (int head = 0; head < h.heads_; ++head) {
        do {
          ++current;
        } while (!IsPrime(current) || seen.count(current));
        seen.insert(current);
        primes.push_back(current);
        offsets.push_back(total);
        total += current;
      }
    }
    h.primes_.push_back(std::move(primes));
    h.offsets_.push_back(std::move(offsets));
  }
  return h;
}

int64_t EngramHashing::RowsNeeded(int e) const {
  int64_t total = 0;
  for (int64_t p : primes_[e]) total += p;
  return total;
}

void EngramHashing::Hash(int e, std::span<const int64_t> back, int64_t* out) const {
  const std::vector<int64_t>& mult = multipliers_[e];
  bool blocked = false;
  int64_t rolling = 0;
  for (int s = 0; s < max_ngram_; ++s) {
    blocked = blocked || back[s] < 0;
    const int64_t token = blocked ? pad_ : back[s];
    const int64_t product = token * mult[s];
    if (s == 0) {
      rolling = product;
      continue;
    }
    rolling ^= product;
    for (int head = 0; head < heads_; ++head) {
      const int col = (s - 1) * heads_ + head;
      out[col] = rolling % primes_[e][col] + offsets_[e][col];
    }
  }
}

}  // namespace spark::engine::model::dsv41
