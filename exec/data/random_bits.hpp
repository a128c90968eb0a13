// Draws from std::mt19937_64 that repeat bit for bit on every standard
// library: the engine's output is fixed by the C++ standard, but the
// distributions (uniform_real_distribution, std::shuffle) are not, so values
// that must repeat are derived from the raw bits here.
#pragma once

#include <cstdint>
#include <random>

namespace trainsim {

// Uniform in [0, 1): the engine's top 53 bits times 2^-53 (exact in a double).
inline double uniform_unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform integer in [0, n), n >= 1, without modulo bias: draws below
// 2^64 mod n are rejected so every residue has the same number of preimages.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;  // = 2^64 mod n
  uint64_t r = rng();
  while (r < threshold) r = rng();
  return r % n;
}

// A seed for stream `stream` of run seed `seed` (splitmix64's finaliser over
// both), so e.g. each epoch's shuffle gets an unrelated engine.
inline uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace trainsim
