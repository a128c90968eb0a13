// Real English text for the language models: the fortune cookies of Debian's
// `fortunes` and `fortunes-min` packages (/usr/share/games/fortunes), read as
// bytes. Each sample is `context` bytes and its labels the `context` bytes
// that follow each of them (next-byte prediction), as a byte-level GPT or
// LSTM language model trains.
#pragma once

#include <cstdint>
#include <string>

#include "exec/data/dataset.hpp"

namespace trainsim {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
inline constexpr int64_t kByteVocabulary = 256;

// Every fortune file of `dir` (its regular files without an extension, in
// name order; the strfile indexes `*.dat` are skipped), one stream of bytes
// with each `%` separator line dropped. Samples are its consecutive windows
// of context + 1 bytes, `context` apart: x the first `context` bytes (ids
// stored as floats), y the last `context`. The last 5% of the windows are
// the test set, so no test byte is trained on. InputError naming `dir` when
// it holds no fortunes (with the package that provides them) or fewer than
// 40 windows.
Dataset load_fortunes(const std::string& dir, int64_t context);

}  // namespace trainsim
