// session: save a decoding session to a file and restore it in a fresh
// context, with the installed libsluice.
//
//     session MODEL STATE_FILE
//
// Feeds a prompt, saves the state, then evaluates the same continuation in
// the original context and in a new one restored from the file: the two
// logit vectors must be bit-identical. Prints max|diff| and the argmax of
// each; exit 0 when identical, 1 otherwise.
#include <sluice/sluice.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Close {
    void operator()(sluice_ctx *c) const { sluice_close(c); }
};
using Ctx = std::unique_ptr<sluice_ctx, Close>;

void check(sluice_ctx *ctx, sluice_status st, const char *what) {
    if (st != SLUICE_OK) throw std::runtime_error(std::string(what) + ": " + sluice_last_error(ctx));
}

Ctx open(const char *path) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = 2;
    sluice_ctx *raw = nullptr;
    sluice_status st = sluice_open(path, &cfg, &raw);
    Ctx ctx(raw);
    check(raw, st, "open");
    return ctx;
}

std::vector<int32_t> tokenize(sluice_ctx *ctx, const std::string &text) {
    std::vector<int32_t> ids(text.size() + 1);
    size_t n = 0;
    check(ctx, sluice_tokenize(ctx, text.data(), text.size(), ids.data(), ids.size(), &n), "tokenize");
    ids.resize(n);
    return ids;
}

std::vector<float> eval(sluice_ctx *ctx, const std::vector<int32_t> &ids) {
    std::vector<float> logits((size_t)sluice_n_vocab(ctx));
    check(ctx, sluice_eval(ctx, ids.data(), ids.size(), logits.data()), "eval");
    return logits;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s MODEL STATE_FILE\n", argv[0]);
        return 2;
    }
    try {
        Ctx a = open(argv[1]);
        std::vector<int32_t> prompt = tokenize(a.get(), "In the beginning God created the heaven");
        prompt.insert(prompt.begin(), sluice_token_bos(a.get()));
        eval(a.get(), prompt);
        check(a.get(), sluice_state_save(a.get(), argv[2]), "save");
        const std::vector<int32_t> more = tokenize(a.get(), " and the earth.");
        const std::vector<float> x = eval(a.get(), more);

        Ctx b = open(argv[1]);  // a fresh context: nothing but the file carries the session
        check(b.get(), sluice_state_load(b.get(), argv[2]), "load");
        const std::vector<float> y = eval(b.get(), more);

        double maxd = 0;
        for (size_t i = 0; i < x.size(); i++) maxd = std::max(maxd, (double)std::fabs(x[i] - y[i]));
        const auto am = [](const std::vector<float> &v) { return (int)(std::max_element(v.begin(), v.end()) - v.begin()); };
        const bool same = x == y;
        std::printf("session: %zu prompt tokens saved at position %d; continuation of %zu tokens: max|diff| %g, "
                    "argmax %d vs %d: %s\n",
                    prompt.size(), sluice_n_past(b.get()) - (int)more.size(), more.size(), maxd, am(x), am(y),
                    same ? "bit-identical" : "DIFFERENT");
        return same ? 0 : 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "session: %s\n", e.what());
        return 1;
    }
}
