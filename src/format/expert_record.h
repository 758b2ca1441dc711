// One routed expert record of an experts-L{n}.bin bank (FORMAT.md §6):
// the 48-byte header, three blocked index matrices and the row scales.
#pragma once
#include <cstdint>
#include <string>

#include "common/status.h"

namespace sluice {

constexpr uint32_t kExpertMagic = 0x50584557u;  // "WEXP"

struct ExpertGeom {
    int64_t I = 0;      // moe_intermediate_size: rows of gate/up
    int64_t n_in = 0;   // hidden or latent width: cols of gate/up, rows of down
    int stages = 3, entries = 256, index_bits = 8;
    int unit = 3;       // bytes per (row, vector): S for 8-bit codes, 3 for VQ4P
    int64_t gate_bytes = 0, down_bytes = 0;  // gate == up size
    int64_t body_bytes = 0;                  // indices + scales
    int64_t stride = 0;                      // record stride from the manifest

    // Fills the derived sizes; fails when a dimension is not a multiple of 8.
    Status init(int64_t I_, int64_t n_in_, int stages_, int entries_, int index_bits_, int64_t stride_);
};

struct ExpertView {
    const uint8_t *gate = nullptr, *up = nullptr, *down = nullptr;  // blocked indices
    const uint8_t *scales = nullptr;  // f16: I gate, I up, n_in down
    uint16_t codebook_id = 0;
};

// Checks a record read into memory (stride bytes) against what the bank index
// says (FORMAT.md §6.11, plus every region bounded so decoding can never read
// past the buffer), optionally its CRC, and fills the view. `where` names the
// bank file.
Status check_expert_record(const uint8_t *rec, const ExpertGeom &g, int layer, int expert, int64_t codebook_base,
                           int64_t n_books, bool verify_crc, const std::string &where, ExpertView *out);

// The three matrices of a record, in the order their books follow
// codebook_id (gate, up, down: S books each).
enum class ExpertMatrix { gate = 0, up = 1, down = 2 };

// Rows [r0, r0 + n) of one matrix of a checked record as dense f32 (FORMAT.md
// §6.9): W[r][8v + j] = scale[r] · Σ_s book(codebook_id + m·S + s)[j][code(r, v, s)],
// the stages summed in order. books: the container's decoded codebooks
// (Container::book(0)), book_entries each (Container::book_entries(): 8-bit
// codes pad every book to 256), component-major. Rows outside the matrix
// come out zero. For export (GGUF) and dense checks; the engine's products
// never build W.
void expert_dense_rows(const ExpertView &v, const ExpertGeom &g, ExpertMatrix m, const float *books, int book_entries,
                       int64_t r0, int64_t n, float *out);

}  // namespace sluice
