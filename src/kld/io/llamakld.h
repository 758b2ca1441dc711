// llama.cpp `.kld` base files (KLD.md §6): read, write (export-kld), and the
// llama.cpp consumer mathematics for comparing a candidate against one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kld/stats/compare.h"
#include "kld/kld_common.h"
#include "kld/io/operand.h"
#include "kld/io/suite.h"

namespace sluice::kld {

struct KldFile {
    std::string path;
    int32_t n_ctx = 0, n_vocab = 0, n_chunk = 0;
    std::vector<int32_t> tokens;  // n_ctx * n_chunk
    uint64_t rows_offset = 0;     // byte offset of chunk 0, row 0
    int rows_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
    int row_u16() const { return 2 * ((n_vocab + 1) / 2) + 4; }  // nv
};

uint64_t kld_expected_size(int64_t n_ctx, int64_t n_vocab, int64_t n_chunk);
// Checks magic, fields and the §6.1 size formula (llama.cpp does not).
Status kld_open(const std::string& path, KldFile* out);
// Reads the encoded row for scored position j (n_ctx/2 <= j <= n_ctx-2).
Status kld_read_row(const KldFile& f, int chunk, int j, std::vector<uint16_t>* row);
// §6.3 writer encoding of one logits row into nv uint16 slots.
void kld_encode_row(const float* x, int32_t V, uint16_t* out);
// ln p̂_v = scale * q_v + min_log_prob.
void kld_decode_row(const uint16_t* row, int32_t V, float* logp);

struct KldWriteOptions {
    WindowSel sel;
};
// export-kld: suite + reference → .kld with n_ctx = T, one chunk per window.
// Warns (through *warning) that festr2 windows carry no BOS.
Status export_kld(const Suite& s, Operand& ref, const KldWriteOptions& opt, const std::string& out_path,
                  std::string* warning);

// An in-memory suite whose windows are the .kld chunks (domain "kld"), so a
// v0 candidate directory can be matched to the chunks by token hash.
// bos >= 0: token 0 of every chunk becomes bos, as llama.cpp's perplexity
// evaluated it when its vocabulary adds BOS (the file stores the original).
Suite suite_from_kld(const KldFile& f, int32_t bos = -1);

// llama.cpp flow: candidate against a .kld base with llama.cpp's own
// arithmetic (the −16 cut, quantized top-1, float lse), printing its block.
// bos >= 0: the candidate sees each chunk with BOS substituted for token 0
// (KLD.md §6.2), the conditioning llama.cpp's rows had; recorded in the receipt.
Status compare_kld(const KldFile& f, Operand& cand, json* receipt, std::string* text, int32_t bos = -1);

}  // namespace sluice::kld
