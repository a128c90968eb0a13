// A synthetic sparse text-classification set for Parallax-style runs (seed
// 004 trains models whose embedding gradients touch few rows): each sample is
// a bag of token ids whose distribution depends on its class, so a
// bag-of-embeddings classifier (the zoo's text-bag) can learn it.
#pragma once

#include <cstdint>

#include "exec/data/dataset.hpp"

namespace trainsim {

// Defaults, equal to the zoo model text-bag's (model/zoo/sequence.cpp; a test
// holds them equal).
inline constexpr int64_t kTextVocabulary = 50'000;
inline constexpr int64_t kTextTokensPerSample = 32;
inline constexpr int64_t kTextClasses = 4;
inline constexpr int64_t kTextTrainSamples = 20'000;
inline constexpr int64_t kTextTestSamples = 4'000;

// Each token of a sample of class c is, with probability kTextSignalFraction,
// uniform over class c's own range of ids, and otherwise drawn from a Zipf
// background over the whole vocabulary (P(id k) ∝ 1/(k+1): low ids are the
// common words). Class c's range is the c-th of `classes` equal slices of the
// upper half of the vocabulary, where the background is rare.
inline constexpr double kTextSignalFraction = 0.125;

// The id range [first, first + count) of class `label`'s own tokens.
struct TokenRange {
  int64_t first = 0;
  int64_t count = 0;
};
TokenRange class_token_range(int64_t vocabulary, int64_t classes, int64_t label);

// {train, tokens_per_sample} and {test, tokens_per_sample} token ids stored
// as floats (exact: vocabulary <= 2^24), labels uniform over the classes.
// The same arguments give the same data bit for bit on any platform.
// InputError naming the argument if vocabulary < 2·classes or > 2^24,
// tokens_per_sample < 1, classes < 2, or a negative sample count.
Dataset make_synthetic_text(int64_t vocabulary, int64_t tokens_per_sample, int64_t classes, int64_t train,
                            int64_t test, uint64_t seed);

}  // namespace trainsim
