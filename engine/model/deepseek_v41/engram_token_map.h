// Engram's compressed token map: every token id of the checkpoint's tokenizer mapped onto a
// smaller id space in which tokens that normalise alike (" The", "the", "THE") share an id, as
// transformers' build_compressed_token_map derives it: the token decoded alone, then NFKC, NFD,
// combining marks removed, each code point lowercased, runs of [ \t\r\n] collapsed to one space,
// surrounding white space stripped (a token that is exactly one space stays " "); a token whose
// decoding is not valid UTF-8 is keyed by its raw vocabulary string, and an empty result by the
// decoded text. Ids are handed out in order of first appearance. The size of that space must
// equal engram_compressed_vocab_size: every hash multiplier derives from it.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace spark::engine::model::dsv41 {

// The map (index: token id) of `tok`. Internal when ICU fails on a token.
Result<std::vector<int32_t>> BuildCompressedTokenMap(const tokenizer::Tokenizer& tok);

// The map of the tokenizer in `dir` (tokenizer.json), or, without one, the map stored in
// `dir`/engram_token_map.txt (one id per line); checked against `compressed_vocab_size` and
// required to cover `pad_id`. NotFound with neither file; InvalidArgument naming the file for
// a bad line or a size that disagrees with config.json.
Result<std::vector<int32_t>> LoadCompressedTokenMap(const std::string& dir,
                                                    int compressed_vocab_size, int pad_id);

}  // namespace spark::engine::model::dsv41
