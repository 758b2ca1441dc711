#include "format/expert_record.h"

#include "format/crc32.h"
#include "format/f16.h"

namespace sluice {

Status ExpertGeom::init(int64_t I_, int64_t n_in_, int stages_, int entries_, int index_bits_, int64_t stride_) {
    I = I_;
    n_in = n_in_;
    stages = stages_;
    entries = entries_;
    index_bits = index_bits_;
    stride = stride_;
    if (I % 8 != 0 || n_in % 8 != 0)
        return unsupported("expert matrices need widths that are multiples of 8 (moe_intermediate_size " +
                           std::to_string(I) + ", input width " + std::to_string(n_in) + ")");
    unit = index_bits == 6 ? 3 : stages;
    auto blocks = [](int64_t rows) { return (rows + 63) / 64; };
    gate_bytes = blocks(I) * (n_in / 8) * 64 * unit;
    down_bytes = blocks(n_in) * (I / 8) * 64 * unit;
    body_bytes = 2 * gate_bytes + down_bytes + 2 * (2 * I + n_in);
    return Status::ok();
}

Status check_expert_record(const uint8_t *rec, const ExpertGeom &g, int layer, int expert, int64_t codebook_base,
                           int64_t n_books, bool verify_crc, const std::string &where, ExpertView *out) {
    auto bad = [&](const std::string &what) {
        return io_error(where + ": expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                        ": record header is not what the bank index describes (" + what + ")");
    };
    if (g.stride < 48) return bad("stride under 48 bytes");
    if (rd32(rec) != kExpertMagic) return bad("bad magic");
    if (rd16(rec + 4) != (uint16_t)layer) return bad("layer field is " + std::to_string(rd16(rec + 4)));
    if (rd16(rec + 6) != (uint16_t)expert) return bad("expert id field is " + std::to_string(rd16(rec + 6)));
    const uint8_t fmt = rec[8];
    if (g.index_bits == 6 ? fmt != 8 : (fmt != 4 && fmt != 5))
        return bad("fmt " + std::to_string(fmt) + " disagrees with the manifest's index_bits " +
                   std::to_string(g.index_bits));
    const uint16_t cb = rd16(rec + 10);
    if (rd16(rec + 12) != 0) return bad("lowrank_id is not 0");
    if ((int64_t)rd32(rec + 16) * 4096 != g.stride) return bad("rec_4k_blocks does not match the stride");
    if ((int64_t)cb + 3 * g.stages > n_books) return bad("codebook_id " + std::to_string(cb) + " out of range");
    // warp builds gate/up tables from the first routed expert's books; sluice
    // requires every record to use the layer's books so results never depend
    // on which expert happens to be first.
    if ((int64_t)cb != codebook_base)
        return bad("codebook_id " + std::to_string(cb) + " differs from the layer's codebook_base " +
                   std::to_string(codebook_base));
    const uint32_t gate_off = rd32(rec + 20), up_off = rd32(rec + 24), down_off = rd32(rec + 28),
                   sc_off = rd32(rec + 32);
    if (gate_off != 48) return bad("gate_off is not 48");
    if (!(gate_off < up_off && up_off < down_off && down_off < sc_off && (int64_t)sc_off <= g.stride))
        return bad("offsets out of order or past the record");
    if ((int64_t)(up_off - gate_off) < g.gate_bytes || (int64_t)(down_off - up_off) < g.gate_bytes ||
        (int64_t)(sc_off - down_off) < g.down_bytes)
        return bad("an index region is smaller than its matrix");
    const int64_t scale_bytes = 2 * (2 * g.I + g.n_in);
    if (scale_bytes > g.stride - (int64_t)sc_off) return bad("row scales run past the record");
    if (verify_crc) {
        // FORMAT.md §6.4: the matrices are contiguous, so the offsets are
        // exact functions of the manifest's geometry. An edited
        // expert_quant (stages 3 -> 2) passes the ordering checks above but
        // not these.
        if (up_off != gate_off + g.gate_bytes || down_off != up_off + g.gate_bytes ||
            sc_off != down_off + g.down_bytes)
            return bad("matrix offsets " + std::to_string(gate_off) + "/" + std::to_string(up_off) + "/" +
                       std::to_string(down_off) + "/" + std::to_string(sc_off) +
                       " differ from the contiguous layout expert_quant implies");
        uint32_t want = rd32(rec + 36);
        uint32_t got = crc32_ieee(rec + 48, (size_t)(sc_off + scale_bytes - 48));
        if (want != got)
            return io_error(where + ": expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                            ": checksum mismatch");
    }
    out->gate = rec + gate_off;
    out->up = rec + up_off;
    out->down = rec + down_off;
    out->scales = rec + sc_off;
    out->codebook_id = cb;
    return Status::ok();
}

void expert_dense_rows(const ExpertView &v, const ExpertGeom &g, ExpertMatrix m, const float *books, int book_entries,
                       int64_t r0, int64_t n, float *out) {
    const bool down = m == ExpertMatrix::down;
    const int64_t cols = down ? g.I : g.n_in;
    const int64_t rows = down ? g.n_in : g.I;
    const int64_t nv = cols / 8;
    const int S = g.stages, E = book_entries, u = g.unit;
    const uint8_t *idx = m == ExpertMatrix::gate ? v.gate : m == ExpertMatrix::up ? v.up : v.down;
    // Row scales: I gate, I up, n_in down (FORMAT.md §6.8).
    const int64_t scale_at = m == ExpertMatrix::gate ? 0 : m == ExpertMatrix::up ? g.I : 2 * g.I;
    const float *book0 = books + ((int64_t)v.codebook_id + (int64_t)m * S) * 8 * E;
    for (int64_t k = 0; k < n; k++) {
        const int64_t r = r0 + k;
        float *o = out + k * cols;
        if (r < 0 || r >= rows) {
            for (int64_t c = 0; c < cols; c++) o[c] = 0.0f;
            continue;
        }
        const float rho = f16_scale(rd16(v.scales + 2 * (scale_at + r)));
        // [row block][vector][row in block][unit] (FORMAT.md §6.5).
        const uint8_t *blk = idx + (r >> 6) * nv * 64 * u + (r & 63) * u;
        for (int64_t vi = 0; vi < nv; vi++) {
            const uint8_t *c = blk + vi * 64 * u;
            int code[8] = {};
            if (g.index_bits == 6) {
                code[0] = c[0] & 63;
                code[1] = ((c[0] >> 6) | (c[1] << 2)) & 63;
                code[2] = ((c[1] >> 4) | (c[2] << 4)) & 63;
                code[3] = c[2] >> 2;
            } else {
                for (int s = 0; s < S && s < 8; s++) code[s] = c[s];
            }
            for (int j = 0; j < 8; j++) {
                float w = 0.0f;
                for (int s = 0; s < S && s < 8; s++) w += book0[(int64_t)s * 8 * E + (int64_t)j * E + code[s]];
                o[vi * 8 + j] = rho * w;
            }
        }
    }
}

}  // namespace sluice
