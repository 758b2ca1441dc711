#include "convert/experts.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>

#include "convert/numeric.h"
#include "convert/util.h"

namespace sluice::convert {

static const char* kKindName[3] = {"gate", "up", "down"};

std::string bank_file(int layer) { return "experts-L" + std::to_string(layer) + ".bin"; }
std::string codebook_part(int layer) { return "codebooks-L" + std::to_string(layer) + ".bin"; }

bool layer_done(const std::string& dir, const ModelPlan& mp, const ExpertParams& p, int layer) {
    const RecordGeom g = record_geometry(mp.moe_inter, mp.lat, p.S, p.index_bits);
    return file_size(dir + "/" + bank_file(layer)) == static_cast<int64_t>(g.stride) * mp.num_experts &&
           file_size(dir + "/" + codebook_part(layer)) == static_cast<int64_t>(3 * p.S * codebook_record_size(p.E));
}

void normalize_rows(const float* w, int64_t M, int64_t N, float* out, uint16_t* scales) {
    for (int64_t r = 0; r < M; ++r) {
        float m = 0.0f;
        for (int64_t c = 0; c < N; ++c) m = std::max(m, std::fabs(w[r * N + c]));
        const float s = std::max(m, 1e-8f);
        for (int64_t c = 0; c < N; ++c) out[r * N + c] = w[r * N + c] / s;
        scales[r] = f32_to_f16(s);
    }
}

// Reads expert e's matrix of `kind` as f32 and checks its shape.
static bool read_expert(const Checkpoint& ck, const ModelPlan& mp, int layer, int64_t e, int kind,
                        std::vector<float>* w, std::string* err) {
    const std::string name = mp.expert_name(layer, e, kind);
    std::vector<int64_t> shape;
    if (!ck.logical_shape(name, &shape, err)) return false;
    const auto want = mp.expert_shape(kind);
    if (shape.size() != 2 || shape[0] != want[0] || shape[1] != want[1]) {
        *err = "tensor '" + name + "': shape is not [" + std::to_string(want[0]) + ", " + std::to_string(want[1]) +
               "] as config.json implies";
        return false;
    }
    w->resize(static_cast<size_t>(want[0] * want[1]));
    return ck.read_rows_f32(name, 0, want[0], w->data(), err);
}

bool convert_layer(const Checkpoint& ck, const ModelPlan& mp, const ExpertParams& p, int layer, int base,
                   const std::string& dir, int jobs, ProgressSink* sink, std::string* err, PhaseTimes* times) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string lname = "layer " + std::to_string(layer);
    const int64_t nexp = mp.num_experts;
    const uint64_t layer_seed = mix_seed(p.seed, static_cast<uint64_t>(layer));

    // 1. Codebooks per kind from a sample of experts (13.4 steps 1-4, with
    //    our own seeded permutations in place of torch.randperm).
    std::vector<std::vector<std::vector<float>>> books(3);
    for (int k = 0; k < 3; ++k) {
        const uint64_t kseed = mix_seed(layer_seed, static_cast<uint64_t>(k));
        const int64_t step = std::max<int64_t>(1, nexp / p.cb_sample);
        std::vector<int64_t> ids;
        for (int64_t e = 0; e < nexp && static_cast<int64_t>(ids.size()) < p.cb_sample; e += step) ids.push_back(e);
        const int64_t per = std::max<int64_t>(1, p.train / static_cast<int64_t>(ids.size()));
        std::vector<std::vector<float>> part(ids.size());
        if (!parallel_for(static_cast<int64_t>(ids.size()), jobs, [&](int64_t i, std::string* e) {
                std::vector<float> w;
                const int64_t id = ids[static_cast<size_t>(i)];
                if (!read_expert(ck, mp, layer, id, k, &w, e)) return false;
                const auto sh = mp.expert_shape(k);
                std::vector<float> nw(w.size());
                std::vector<uint16_t> sc(static_cast<size_t>(sh[0]));
                normalize_rows(w.data(), sh[0], sh[1], nw.data(), sc.data());
                Rng rng(mix_seed(kseed, 1000 + static_cast<uint64_t>(id)));
                const auto sel = partial_perm(nw.size() / 8, static_cast<uint64_t>(per), rng);
                auto& out = part[static_cast<size_t>(i)];
                out.resize(sel.size() * 8);
                for (size_t j = 0; j < sel.size(); ++j) std::memcpy(&out[j * 8], &nw[static_cast<size_t>(sel[j]) * 8], 32);
                return true;
            }, err))
            return false;
        std::vector<float> x;
        for (const auto& v : part) x.insert(x.end(), v.begin(), v.end());
        part.clear();
        const uint64_t nx = x.size() / 8;
        if (nx > static_cast<uint64_t>(p.train)) {
            Rng rng(mix_seed(kseed, 7));
            const auto sel = partial_perm(nx, static_cast<uint64_t>(p.train), rng);
            std::vector<float> r(sel.size() * 8);
            for (size_t j = 0; j < sel.size(); ++j) std::memcpy(&r[j * 8], &x[static_cast<size_t>(sel[j]) * 8], 32);
            x.swap(r);
        }
        if (sink) sink->progress("kmeans", k, 3, lname + " " + kKindName[k]);
        if (!train_rvq(x, p.S, p.E, p.iters, mix_seed(kseed, 11), jobs, &books[static_cast<size_t>(k)], err)) {
            *err = lname + " " + kKindName[k] + ": " + *err;
            return false;
        }
    }

    const auto t1 = std::chrono::steady_clock::now();
    // 2. Encode every expert into its fixed-size record, in parallel; each
    //    record lands at e * stride, so thread scheduling cannot move a byte.
    const RecordGeom g = record_geometry(mp.moe_inter, mp.lat, p.S, p.index_bits);
    const std::string bank = dir + "/" + bank_file(layer);
    std::string tmp;
    int fd = -1;
    if (!create_temp(bank, &fd, &tmp, err)) return false;
    std::mutex mu;
    int64_t finished = 0;
    const bool ok = parallel_for(nexp, jobs, [&](int64_t e, std::string* er) {
        std::vector<uint8_t> idx[3];
        std::vector<uint16_t> sc[3];
        for (int k = 0; k < 3; ++k) {
            std::vector<float> w;
            if (!read_expert(ck, mp, layer, e, k, &w, er)) return false;
            const auto sh = mp.expert_shape(k);
            std::vector<float> nw(w.size());
            sc[k].resize(static_cast<size_t>(sh[0]));
            normalize_rows(w.data(), sh[0], sh[1], nw.data(), sc[k].data());
            idx[k].resize(nw.size() / 8 * static_cast<size_t>(p.S));
            encode_rvq(nw.data(), static_cast<int64_t>(nw.size() / 8), books[static_cast<size_t>(k)], p.E, idx[k].data());
        }
        std::vector<uint8_t> rec(g.stride);
        const uint8_t* ip[3] = {idx[0].data(), idx[1].data(), idx[2].data()};
        const uint16_t* sp[3] = {sc[0].data(), sc[1].data(), sc[2].data()};
        build_record(g, layer, static_cast<int>(e), base, ip, sp, rec.data());
        if (!pwrite_all(fd, rec.data(), rec.size(), static_cast<uint64_t>(e) * g.stride, tmp, er)) return false;
        std::lock_guard<std::mutex> lk(mu);
        ++finished;
        if (sink) sink->progress("layer", finished, nexp, lname + " experts");
        return true;
    }, err);
    if (!ok) {
        ::close(fd);
        return false;
    }
    if (!fsync_and_close(fd, tmp, err)) return false;

    // 3. Codebook part first, bank rename last: the bank's final name is the
    //    layer's commit point.
    std::string cb;
    for (int k = 0; k < 3; ++k)
        for (int s = 0; s < p.S; ++s) {
            const auto r = codebook_record(static_cast<uint32_t>(base + k * p.S + s), books[static_cast<size_t>(k)][static_cast<size_t>(s)], p.E);
            cb.append(reinterpret_cast<const char*>(r.data()), r.size());
        }
    if (!write_file_atomic(dir + "/" + codebook_part(layer), cb, err)) return false;
    if (times) {
        const std::chrono::duration<double> km = t1 - t0, enc = std::chrono::steady_clock::now() - t1;
        times->kmeans_s += km.count();
        times->encode_s += enc.count();
    }
    return rename_file(tmp, bank, err);
}

}  // namespace sluice::convert
