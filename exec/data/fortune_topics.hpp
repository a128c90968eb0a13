// Real text for the sparse text classifier (the zoo's text-bag): fortune
// cookies of four topics from Debian's `fortunes` package, each one a bag of
// hashed word ids labelled with its topic, so Parallax's sparse embedding
// gradients train on real English rather than on generated tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "exec/data/dataset.hpp"

namespace trainsim {

// The topics, by fortune file; the label is the index here.
inline constexpr std::array<const char*, 4> kFortuneTopics = {"computers", "politics", "science", "songs-poems"};

// A word's id in [1, vocabulary): FNV-1a (64-bit) of its bytes, folded.
// Id 0 stands for a fortune without a word.
int64_t hashed_word_id(std::string_view word, int64_t vocabulary);

// Every fortune of the topic files in `dir` (separated by `%` lines): its
// first `tokens` words (runs of ASCII letters, digits and inner apostrophes,
// lower-cased) as hashed ids stored as floats, a shorter fortune's words
// repeated to fill the bag; the label its topic. The fortunes are shuffled with a fixed seed and the last 10% held
// out, so the same files give the same split. InputError naming the file
// when one is missing (with the package that provides it) and naming the
// argument when vocabulary < 2 or > 2^24 or tokens < 1.
Dataset load_fortune_topics(const std::string& dir, int64_t vocabulary, int64_t tokens);

}  // namespace trainsim
