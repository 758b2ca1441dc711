// libFuzzer harness: session-state files (sluice_state_load ->
// Engine::load_state) read from untrusted bytes into a whole opened engine.
// Once per process it writes a tiny model with the project's own generator
// (run_synth) into a private temp dir, opens it, evaluates a short prefix and
// saves that session as the baseline. Each input is then loaded as a state
// file into that session:
//   - refused: the session must be exactly as it was (same position, and the
//     next token's logits bit-identical to the reference), since chat's
//     /load relies on a failed load keeping the conversation;
//   - accepted: the next eval must not crash, and a success must give finite
//     logits (a state full of NaN must be refused at load, not surface later).
// The baseline is then loaded back for the next input.
// With SLUICE_FUZZ_SESSION_SEEDS=DIR set, the start-up writes seeds into DIR:
// valid saved sessions at a few positions and truncations of them (the
// harness cannot ship seeds: a state file names its model's manifest hash).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "model/engine.h"
#include "synth/synth.h"

namespace {

namespace fs = std::filesystem;

struct World {
    sluice::Engine engine;
    std::string base;          // the baseline session (kPrefix evaluated)
    std::vector<float> ref;    // logits of kNext after the baseline
    int vocab = 0;
};

constexpr int32_t kPrefix[] = {3, 7, 11};
constexpr int32_t kNext = 5;

[[noreturn]] void die(const std::string &why) {
    std::fprintf(stderr, "fuzz_session: %s\n", why.c_str());
    std::abort();
}

void check(const sluice::Status &st, const char *what) {
    if (!st) die(std::string(what) + ": " + st.message());
}

std::string slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// The smallest Kimi-Linear-shaped model that still has both layer kinds
// (KDA layers 1-3, MLA layer 4) and a routed MoE.
sluice::SynthOptions tiny_model(const std::string &out) {
    sluice::SynthOptions o;
    o.out = out;
    o.layers = 4;
    o.mla_every = 4;
    o.hidden = 128;
    o.vocab = 256;
    o.heads = 2;
    o.experts = 8;
    o.top_k = 2;
    o.moe_inter = 64;
    o.inter = 256;
    o.kda_heads = 2;
    o.kda_dim = 32;
    o.kv_lora = 32;
    o.d_nope = 16;
    o.d_rope = 8;
    o.d_v = 16;
    o.jobs = 1;
    return o;
}

World *make_world() {
    auto *w = new World;
    const std::string dir = fuzz::temp_dir() + "/model.waste";
    check(sluice::run_synth(tiny_model(dir), nullptr), "synth");
    sluice::EngineOptions opt;
    opt.n_threads = 1;
    opt.max_context = 32;
    opt.io_depth = 0;
    opt.direct_io = false;
    opt.use_cache = false;
    opt.preload_hotlist = false;
    check(w->engine.open(dir, opt), "open");
    w->vocab = w->engine.config().vocab;
    w->ref.resize((size_t)w->vocab);
    const std::string seeds = std::getenv("SLUICE_FUZZ_SESSION_SEEDS") ? std::getenv("SLUICE_FUZZ_SESSION_SEEDS") : "";
    // Seeds: valid sessions at positions 0..3 (MLA caches of 0..3 rows),
    // each also cut short and at its header.
    for (int n = 0; n <= 3; n++) {
        w->engine.reset();
        if (n > 0) check(w->engine.eval(kPrefix, n, nullptr, false), "eval prefix");
        const std::string path = fuzz::temp_dir() + "/seed-" + std::to_string(n) + ".state";
        check(w->engine.save_state(path), "save");
        if (n == 3) w->base = path;
        if (seeds.empty()) continue;
        fs::create_directories(seeds);
        const std::string bytes = slurp(path);
        const size_t cuts[] = {bytes.size(), bytes.size() - 4, bytes.size() / 2, 120, 60};
        for (size_t cut : cuts) {
            std::ofstream f(seeds + "/session-" + std::to_string(n) + "-" + std::to_string(cut), std::ios::binary);
            f.write(bytes.data(), (std::streamsize)std::min(cut, bytes.size()));
        }
    }
    check(w->engine.eval(&kNext, 1, w->ref.data(), false), "eval reference");
    check(w->engine.load_state(w->base), "load baseline");
    return w;
}

World &world() {
    static World *w = make_world();
    return *w;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    (void)world();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    World &w = world();
    const std::string path = fuzz::put("input.state", std::string_view(reinterpret_cast<const char *>(data), size));
    const int pos0 = w.engine.n_past();
    std::vector<float> got((size_t)w.vocab);
    const sluice::Status st = w.engine.load_state(path);
    if (!st) {
        if (st.message().find(path) == std::string::npos) die("refusal does not name the file: " + st.message());
        if (w.engine.n_past() != pos0) die("a refused load moved the position: " + st.message());
        check(w.engine.eval(&kNext, 1, got.data(), false), "eval after a refused load");
        if (std::memcmp(got.data(), w.ref.data(), got.size() * 4) != 0)
            die("a refused load changed the session: " + st.message());
    } else if (w.engine.n_past() < w.engine.max_context()) {
        if (w.engine.eval(&kNext, 1, got.data(), false))
            for (float v : got)
                if (!std::isfinite(v)) die("an accepted state gave non-finite logits without an error");
    }
    check(w.engine.load_state(w.base), "reload baseline");
    return 0;
}
