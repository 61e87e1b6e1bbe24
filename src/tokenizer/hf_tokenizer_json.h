// Hugging Face tokenizer.json (+ tokenizer_config.json) <-> Vocab.
//
// Reading (Tokenizer::from_hf_json) supports:
//  - byte-level BPE whose pre_tokenizer (Split, Digits, Punctuation and ByteLevel components) is
//    the Sequence of one of k25's pre-tokenisers (GPT-2, Llama 3, Qwen2, Qwen3.5, Tekken,
//    DeepSeek LLM, StarCoder/SmolLM, Falcon; see hf_pre_tokenizer_steps); an NFC normalizer is
//    accepted but not applied (input is assumed to be NFC already);
//  - SentencePiece-style BPE (byte_fallback, "▁" for spaces via normalizer Prepend/Replace or a
//    Metaspace pre-tokeniser): mapped to Vocab::Kind::Spm with score -rank for the token a merge
//    of rank `rank` produces (0 for single characters, bytes and added tokens; -1e30 for tokens no
//    merge produces), so that the score-driven SPM algorithm merges in HF's order.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace k25 {

// Parses tokenizer.json (and tokenizer_config.json in the same directory, when present).
Vocab read_hf_tokenizer_json(const std::string& tokenizer_json_path);

// Writes tokenizer.json at `path` and tokenizer_config.json beside it. SPM vocabularies become a
// byte-fallback BPE model whose merges are derived from the scores (every split of a token into
// two tokens, ordered by the token's score), as Hugging Face's Llama converter does. Lost on the
// way: eot/pad ids that have no name in the config, and the texts of duplicate tokens (the later
// ids come back as "[PAD<id>]" placeholders). Gemma 4 (BPE over raw UTF-8) is not written.
void write_hf_tokenizer_json(const Vocab& vocab, const std::string& path);

}  // namespace k25
