// The tower, the splice and the image C API against warp's results in
// ../shared/fixtures/vision (VISION.md §12). Tolerances: embeddings 5e-5
// (the fixture README's), logits 2e-4 with argmax and greedy8 equal.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "api/ctx.h"
#include "fixtures_util.h"
#include "quant/kernels.h"
#include "sluice/sluice.h"

namespace fs = std::filesystem;
using sluice_test::DiffStats;
using sluice_test::diff_stats;
using sluice_test::read_f32;

namespace {

std::string vdir() { return sluice_test::fixtures_dir() + "/vision"; }
std::string container() { return vdir() + "/k3v-tiny.waste"; }
bool have_vision_fixtures() { return fs::exists(vdir() + "/out/cases.json"); }
#define NEED_FIXTURES() \
    if (!have_vision_fixtures()) GTEST_SKIP() << "no " << vdir() << " (../shared absent)"

std::vector<int32_t> read_i32(const std::string &p) {
    std::ifstream f(p, std::ios::binary);
    std::vector<char> b((std::istreambuf_iterator<char>(f)), {});
    std::vector<int32_t> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

sluice_ctx *open_ctx(int vision, int chunk = 0, int threads = 2, int backend = SLUICE_BACKEND_AUTO,
                     const std::string &path = container()) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.vision = vision;
    cfg.prefill_chunk = chunk;
    cfg.n_threads = threads;
    cfg.backend = backend;
    cfg.no_hotlist = 1;
    sluice_ctx *ctx = nullptr;
    sluice_status st = sluice_open(path.c_str(), &cfg, &ctx);
    if (st != SLUICE_OK) {
        ADD_FAILURE() << "open " << path << ": " << sluice_last_error(ctx);
        sluice_close(ctx);
        return nullptr;
    }
    return ctx;
}

void print(const char *what, const DiffStats &d) {
    std::printf("%-34s max|diff| %.3g  mean|diff| %.3g  corr %.9f  argmax %d/%d\n", what, d.max_abs, d.mean_abs,
                d.corr, d.argmax_a, d.argmax_b);
}

// Tokenizes a segments.json prompt segment by segment.
std::vector<int32_t> tokenize_segments(sluice_ctx *ctx, const std::string &path) {
    std::ifstream f(path);
    nlohmann::json j = nlohmann::json::parse(f);
    std::vector<int32_t> ids;
    for (auto &seg : j["segments"]) {
        const std::string text = seg[0].get<std::string>();
        std::vector<int32_t> buf(text.size() + 16);
        size_t n = 0;
        sluice_status st = seg[1].get<bool>()
                               ? sluice_tokenize_markup(ctx, text.data(), text.size(), buf.data(), buf.size(), &n)
                               : sluice_tokenize(ctx, text.data(), text.size(), buf.data(), buf.size(), &n);
        EXPECT_EQ(st, SLUICE_OK) << sluice_last_error(ctx);
        ids.insert(ids.end(), buf.begin(), buf.begin() + (long)n);
    }
    return ids;
}

}  // namespace

TEST(VisionTower, PlanShowsTowerShare) {
    NEED_FIXTURES();
    sluice_memory_plan p;
    char err[256];
    ASSERT_EQ(sluice_plan_model(container().c_str(), 0, 4096, nullptr, &p, err, sizeof err), SLUICE_OK) << err;
    std::printf("plan: floor without images %llu, vision %llu (warp's vision_bytes: 221064832)\n",
                (unsigned long long)p.floor, (unsigned long long)p.vision);
    EXPECT_EQ(p.vision, 221064832ull);
    sluice_ctx *plain = open_ctx(0), *vis = open_ctx(1);
    ASSERT_TRUE(plain && vis);
    sluice_memory_plan a, b;
    ASSERT_EQ(sluice_memory_plan_get(plain, &a), SLUICE_OK);
    ASSERT_EQ(sluice_memory_plan_get(vis, &b), SLUICE_OK);
    EXPECT_EQ(a.vision, 0u);
    EXPECT_EQ(b.vision, 221064832ull);
    // The floor grows by the tower's bytes and by the page tables that map
    // them (one 8-byte entry per 4 KiB page, the plan's page-table term;
    // each floor rounds its own up, hence the 1-byte slack). The runtime
    // term is this process's footprint when each context plans, and the
    // second context's includes the first's memory: it is taken out, with
    // the page tables it adds (1/512 of it).
    ASSERT_GE(b.runtime, a.runtime);
    const uint64_t rt = b.runtime - a.runtime, rt_pt = rt / 512;
    const uint64_t grown = (b.floor - a.floor) - rt, pt = (b.vision + 511) / 512;
    EXPECT_GE(grown + 2, b.vision + pt + rt_pt);
    EXPECT_LE(grown, b.vision + pt + rt_pt + 1);
    sluice_close(plain);
    sluice_close(vis);
}

TEST(VisionTower, RandomPixelsMatchWarp) {
    NEED_FIXTURES();
    sluice_ctx *ctx = open_ctx(1);
    ASSERT_TRUE(ctx);
    struct G {
        int gh, gw;
    } grids[] = {{8, 8}, {4, 6}, {10, 12}};
    for (const G &g : grids) {
        const std::string stem = vdir() + "/out/randn_" + std::to_string(g.gh) + "x" + std::to_string(g.gw);
        std::vector<float> px = read_f32(stem + ".pixels.f32"), emb;
        ASSERT_EQ(px.size(), (size_t)g.gh * g.gw * 588);
        ASSERT_TRUE(ctx->engine.image_encode_pixels(px.data(), {g.gh, g.gw}, &emb).is_ok());
        std::vector<float> warp = read_f32(stem + ".embed.warp.f32");
        ASSERT_EQ(emb.size(), warp.size());
        DiffStats d = diff_stats(emb, warp);
        print(("randn " + std::to_string(g.gh) + "x" + std::to_string(g.gw) + " vs warp").c_str(), d);
        EXPECT_LE(d.max_abs, 5e-5);
        DiffStats r = diff_stats(emb, read_f32(stem + ".embed.vision_ref.f32"));
        print("  vs warp's torch oracle", r);
        EXPECT_LE(r.max_abs, 5e-5);
    }
    sluice_close(ctx);
}

TEST(VisionTower, ImagesMatchWarpAndAreInvariant) {
    NEED_FIXTURES();
    // Thread count and kernel backend change timing, never results: the
    // scalar set on one thread is the reference; every set this CPU runs, on
    // 2 or 3 threads, must give its bits.
    sluice_ctx *a = open_ctx(1, 0, 1, SLUICE_BACKEND_SCALAR);
    ASSERT_TRUE(a);
    std::vector<std::pair<std::string, sluice_ctx *>> others;
    for (auto [be, label] : {std::pair{SLUICE_BACKEND_SCALAR, "scalar"}, {SLUICE_BACKEND_AVX2, "avx2"},
                             {SLUICE_BACKEND_AVX512, "avx512"}, {SLUICE_BACKEND_NEON, "neon"}}) {
        const sluice::Kernels *k = nullptr;
        const char *why = nullptr;
        if (!sluice::select_kernels(be, &k, &why)) {
            std::printf("%s: not compared (%s)\n", label, why);
            continue;
        }
        const int threads = be == SLUICE_BACKEND_AVX2 || be == SLUICE_BACKEND_NEON ? 2 : 3;
        sluice_ctx *c = open_ctx(1, 0, threads, be);
        ASSERT_TRUE(c);
        others.emplace_back(std::string(label) + "/" + std::to_string(threads) + " threads", c);
    }
    for (const char *name : {"img_a", "img_b"}) {
        std::vector<float> px = read_f32(vdir() + "/out/" + name + ".pixels.f32"), ea;
        const sluice::vision::Grid g = std::string(name) == "img_a" ? sluice::vision::Grid{4, 6}
                                                                    : sluice::vision::Grid{26, 38};
        ASSERT_TRUE(a->engine.image_encode_pixels(px.data(), g, &ea).is_ok());
        for (auto &[label, c] : others) {
            std::vector<float> eb;
            ASSERT_TRUE(c->engine.image_encode_pixels(px.data(), g, &eb).is_ok());
            ASSERT_EQ(ea.size(), eb.size());
            EXPECT_EQ(std::memcmp(ea.data(), eb.data(), ea.size() * 4), 0) << name << ": scalar/1 thread vs " << label;
        }
        std::printf("%s: %zu backend/thread settings bit-identical to scalar/1 thread\n", name, others.size());
        DiffStats d = diff_stats(ea, read_f32(vdir() + "/out/" + name + ".embed.f32"));
        print((std::string(name) + " embeddings vs warp").c_str(), d);
        EXPECT_LE(d.max_abs, 5e-5);
    }
    sluice_close(a);
    for (auto &o : others) sluice_close(o.second);
}

// The three prompts: ids, expansion, logits on the chunked and the
// token-at-a-time path, greedy tokens.
TEST(VisionTower, PromptsMatchWarp) {
    NEED_FIXTURES();
    std::ifstream f(vdir() + "/out/cases.json");
    nlohmann::json cases = nlohmann::json::parse(f);
    for (int chunk : {64, 1}) {
        sluice_ctx *ctx = open_ctx(1, chunk);
        ASSERT_TRUE(ctx);
        const int V = sluice_n_vocab(ctx);
        for (auto &c : cases["prompts"]) {
            const std::string name = c["name"];
            ASSERT_EQ(sluice_reset(ctx), SLUICE_OK);
            ASSERT_EQ(sluice_image_clear(ctx), SLUICE_OK);
            for (auto &img : c["images_in_order"]) {
                int32_t n = 0;
                const std::string path = vdir() + "/images/" + img.get<std::string>();
                ASSERT_EQ(sluice_image_add(ctx, path.c_str(), &n), SLUICE_OK) << sluice_last_error(ctx);
                EXPECT_EQ(n, img.get<std::string>() == "img_a.png" ? 6 : 247);
            }
            std::vector<int32_t> ids = tokenize_segments(ctx, vdir() + "/out/" + c["segments"].get<std::string>());
            EXPECT_EQ(ids, read_i32(vdir() + "/out/" + c["ids"].get<std::string>())) << name << ": ids";
            std::vector<int32_t> ex(ids.size() + 2048);
            size_t n_ex = 0;
            ASSERT_EQ(sluice_image_expand(ctx, ids.data(), ids.size(), ex.data(), ex.size(), &n_ex), SLUICE_OK)
                << sluice_last_error(ctx);
            ex.resize(n_ex);
            EXPECT_EQ(ex, read_i32(vdir() + "/out/" + c["expanded"].get<std::string>())) << name << ": expanded";
            std::vector<float> logits((size_t)V);
            ASSERT_EQ(sluice_eval(ctx, ex.data(), ex.size(), logits.data()), SLUICE_OK) << sluice_last_error(ctx);
            EXPECT_EQ(sluice_image_count(ctx), 0) << "the queue is spent after an eval that used it";
            // Chunked against warp's chunked logits; token-at-a-time
            // against warp's stepwise ones where the fixture has them.
            std::string ref = c["logits"];
            if (chunk == 1 && c.contains("logits_stepwise")) ref = c["logits_stepwise"];
            DiffStats d = diff_stats(logits, read_f32(vdir() + "/out/" + ref));
            print((name + (chunk == 1 ? " step" : " chunked") + " logits vs warp").c_str(), d);
            // prompt3 is ill-conditioned in its image rows (a 1e-6 change
            // moves its logits ~7e-5): warp itself is 2.47e-4 from the
            // float64 oracle there, the engine 5.1e-5 (vision_oracle checks
            // the engine against the oracle at 1e-4 on both paths). Being
            // within 2e-4 of warp would mean reproducing warp's float32
            // rounding (docs/LEARNED.md, 2026-12-03). 3e-4 stays under the
            // 6e-4 a swapped GELU form produces.
            const double tol = name == "prompt3" ? 3e-4 : 2e-4;
            EXPECT_LE(d.max_abs, tol) << name;
            EXPECT_EQ(d.argmax_a, d.argmax_b) << name;
            std::vector<int32_t> greedy;
            int32_t next = d.argmax_a;
            for (int i = 0; i < 8; i++) {
                greedy.push_back(next);
                if (i == 7) break;
                ASSERT_EQ(sluice_eval(ctx, &next, 1, logits.data()), SLUICE_OK);
                next = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
            }
            EXPECT_EQ(greedy, c["greedy8"].get<std::vector<int32_t>>()) << name << ": greedy8";
        }
        sluice_close(ctx);
    }
}

TEST(VisionApi, FailedCallsLeaveTheSessionUnchanged) {
    NEED_FIXTURES();
    sluice_ctx *ctx = open_ctx(1);
    ASSERT_TRUE(ctx);
    int32_t n = 0;
    const std::string a = vdir() + "/images/img_a.png";
    ASSERT_EQ(sluice_image_add(ctx, a.c_str(), &n), SLUICE_OK);
    // A file that is not an image, a missing file, bytes that are not an image.
    const std::string not_img = container() + "/manifest.json";
    EXPECT_EQ(sluice_image_add(ctx, not_img.c_str(), &n), SLUICE_E_IO);
    EXPECT_NE(std::string(sluice_last_error(ctx)).find("manifest.json"), std::string::npos) << sluice_last_error(ctx);
    EXPECT_EQ(sluice_image_add(ctx, "/nonexistent/x.png", &n), SLUICE_E_IO);
    EXPECT_EQ(sluice_image_add_memory(ctx, "GIF89a", 6, "short.gif", &n), SLUICE_E_IO);
    EXPECT_EQ(sluice_image_count(ctx), 1) << "failed adds must not touch the queue";
    // Expansion with the wrong number of pads fails and changes nothing.
    std::vector<int32_t> ids = {1, 2, 3}, out(64);
    size_t n_out = 0;
    EXPECT_EQ(sluice_image_expand(ctx, ids.data(), ids.size(), out.data(), out.size(), &n_out), SLUICE_E_ARG);
    ids = {1, 505, 505, 3};
    EXPECT_EQ(sluice_image_expand(ctx, ids.data(), ids.size(), out.data(), out.size(), &n_out), SLUICE_E_ARG);
    ids = {1, 505, 3};
    EXPECT_EQ(sluice_image_expand(ctx, ids.data(), ids.size(), out.data(), 2, &n_out), SLUICE_E_RANGE);
    EXPECT_EQ(n_out, 8u);
    ASSERT_EQ(sluice_image_expand(ctx, ids.data(), ids.size(), out.data(), out.size(), &n_out), SLUICE_OK);
    EXPECT_EQ(n_out, 8u);
    EXPECT_EQ(sluice_n_past(ctx), 0);
    // 32 images at most.
    for (int i = 1; i < SLUICE_MAX_IMAGES; i++) ASSERT_EQ(sluice_image_add(ctx, a.c_str(), &n), SLUICE_OK);
    EXPECT_EQ(sluice_image_add(ctx, a.c_str(), &n), SLUICE_E_ARG);
    EXPECT_EQ(sluice_image_count(ctx), SLUICE_MAX_IMAGES);
    ASSERT_EQ(sluice_image_clear(ctx), SLUICE_OK);
    EXPECT_EQ(sluice_image_count(ctx), 0);
    int32_t w = 0, h = 0;
    EXPECT_EQ(sluice_image_dimensions(a.c_str(), &w, &h), SLUICE_OK);
    EXPECT_EQ(w, 100);
    EXPECT_EQ(h, 60);
    EXPECT_EQ(sluice_image_dimensions(not_img.c_str(), &w, &h), SLUICE_E_IO);
    sluice_close(ctx);
}

TEST(VisionApi, NoTowerIsRefusedByName) {
    NEED_FIXTURES();
    sluice_ctx *ctx = open_ctx(0);  // vision not requested: the tower is never read
    ASSERT_TRUE(ctx);
    int32_t n = 0;
    const std::string a = vdir() + "/images/img_a.png";
    EXPECT_EQ(sluice_image_add(ctx, a.c_str(), &n), SLUICE_E_UNSUPPORTED);
    EXPECT_NE(std::string(sluice_last_error(ctx)).find("vision"), std::string::npos) << sluice_last_error(ctx);
    sluice_close(ctx);
    // A text-only container with vision requested opens, and refuses images.
    const std::string k3 = sluice_test::container_path("k3-tiny");
    if (!fs::exists(k3)) return;
    ctx = open_ctx(1, 0, 2, SLUICE_BACKEND_AUTO, k3);
    ASSERT_TRUE(ctx);
    EXPECT_EQ(sluice_image_add(ctx, a.c_str(), &n), SLUICE_E_UNSUPPORTED);
    EXPECT_NE(std::string(sluice_last_error(ctx)).find("no vision tower"), std::string::npos) << sluice_last_error(ctx);
    sluice_close(ctx);
}

namespace {
// A copy of the fixture container with its manifest replaced (the big
// files are symlinked: nothing is written under ../shared).
std::string copy_with_manifest(const std::string &tag, const std::string &manifest_text,
                               const std::string *vision_json = nullptr) {
    const fs::path dir = fs::temp_directory_path() / ("sluice-vision-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (auto &e : fs::directory_iterator(container())) {
        const std::string n = e.path().filename();
        if (n == "manifest.json" || (vision_json && n == "vision.json")) continue;
        fs::create_symlink(e.path(), dir / n);
    }
    std::ofstream(dir / "manifest.json") << manifest_text;
    if (vision_json) std::ofstream(dir / "vision.json") << *vision_json;
    return dir;
}
std::string slurp(const std::string &p) {
    std::ifstream f(p);
    return std::string((std::istreambuf_iterator<char>(f)), {});
}
sluice_status try_open(const std::string &dir, std::string *err) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.vision = 1;
    cfg.no_hotlist = 1;
    sluice_ctx *ctx = nullptr;
    sluice_status st = sluice_open(dir.c_str(), &cfg, &ctx);
    *err = sluice_last_error(ctx);
    sluice_close(ctx);
    return st;
}
}  // namespace

TEST(VisionLoad, MalformedTowersAreRefusedByName) {
    NEED_FIXTURES();
    std::string err;
    // The converter's manifest before requantization: a Q4G [128, 3, 14, 14]
    // patch kernel with 14-wide rows (VISION.md §10.9).
    std::string d = copy_with_manifest("q4conv", slurp(vdir() + "/k3v-tiny.manifest-before-requant.json"));
    EXPECT_EQ(try_open(d, &err), SLUICE_E_FORMAT);
    std::printf("before requant: %s\n", err.c_str());
    EXPECT_NE(err.find("vision_tower.patch_embed.proj.weight"), std::string::npos) << err;
    fs::remove_all(d);
    // A block matrix with the wrong shape.
    nlohmann::json m = nlohmann::json::parse(slurp(container() + "/manifest.json"));
    bool edited = false;
    for (auto &t : m["trunk"]) {
        if (t["name"] == "vision_tower.encoder.blocks.1.mlp.fc1.weight") {
            t["shape"] = {128, 256};
            edited = true;
        }
    }
    ASSERT_TRUE(edited);
    d = copy_with_manifest("shape", m.dump());
    EXPECT_EQ(try_open(d, &err), SLUICE_E_FORMAT);
    std::printf("bad shape: %s\n", err.c_str());
    EXPECT_NE(err.find("blocks.1.mlp.fc1.weight"), std::string::npos) << err;
    fs::remove_all(d);
    // vision.json geometry out of range, and a missing vision.json.
    nlohmann::json v = nlohmann::json::parse(slurp(container() + "/vision.json"));
    v["qkv_hidden_size"] = 190;
    const std::string vj = v.dump();
    d = copy_with_manifest("geom", slurp(container() + "/manifest.json"), &vj);
    EXPECT_EQ(try_open(d, &err), SLUICE_E_FORMAT);
    std::printf("bad geometry: %s\n", err.c_str());
    EXPECT_NE(err.find("qkv_hidden_size"), std::string::npos) << err;
    fs::remove(fs::path(d) / "vision.json");
    EXPECT_EQ(try_open(d, &err), SLUICE_E_FORMAT);
    EXPECT_NE(err.find("vision.json"), std::string::npos) << err;
    fs::remove_all(d);
}

// Separates the tower from the text model: the prompts with warp's own
// image embeddings spliced in. What remains is the text model's distance.
TEST(VisionTower, PromptsWithWarpEmbeddings) {
    NEED_FIXTURES();
    std::ifstream f(vdir() + "/out/cases.json");
    nlohmann::json cases = nlohmann::json::parse(f);
    sluice_ctx *ctx = open_ctx(1, 64);
    ASSERT_TRUE(ctx);
    const int V = sluice_n_vocab(ctx);
    for (auto &c : cases["prompts"]) {
        const std::string name = c["name"];
        ASSERT_EQ(sluice_reset(ctx), SLUICE_OK);
        for (auto &img : c["images_in_order"]) {
            const std::string stem = img.get<std::string>().substr(0, 5);
            std::vector<float> rows = read_f32(vdir() + "/out/" + stem + ".embed.f32");
            ASSERT_TRUE(ctx->engine.image_queue_rows(rows.data(), (int)(rows.size() / 128)).is_ok());
        }
        std::vector<int32_t> ex = read_i32(vdir() + "/out/" + c["expanded"].get<std::string>());
        std::vector<float> logits((size_t)V);
        ASSERT_EQ(sluice_eval(ctx, ex.data(), ex.size(), logits.data()), SLUICE_OK) << sluice_last_error(ctx);
        DiffStats d = diff_stats(logits, read_f32(vdir() + "/out/" + c["logits"].get<std::string>()));
        print((name + " logits, warp's embeddings").c_str(), d);
        EXPECT_LE(d.max_abs, 2e-4) << name;
        EXPECT_EQ(d.argmax_a, d.argmax_b) << name;
    }
    sluice_close(ctx);
}
