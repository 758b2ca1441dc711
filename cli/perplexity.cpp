// `sluice perplexity MODEL FILE`: llama-perplexity's measure through the C
// API. The text is tokenized (content mode), cut into non-overlapping
// windows of --ctx tokens (the tail that does not fill a window is
// dropped), each window starts from a fresh session with its first token
// replaced by BOS (when the model has one), and only the second half of each
// window is scored, so every scored token has at least ctx/2 tokens of
// context. The interval treats windows, not tokens, as independent.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/checked_file.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "sluice/sluice.h"

namespace sluice {

struct PerplexityCommand {
    CLI::App *sc = nullptr;
    TextHooks hooks;
    std::string model, file, file_opt;
    CLI::Option *file_pos = nullptr;
    bool json = false, no_bos = false, progress = false, no_progress = false;
    int max_windows = 0;
};

namespace {
constexpr uint64_t kMaxText = 1ull << 30;  // a text file larger than 1 GiB is refused, not read

bool read_text(const std::string &path, std::string *out, std::string *err) {
    if (sluice::Status st = sluice::read_input_file(path, kMaxText, out); !st) {
        *err = st.message();
        return false;
    }
    return true;
}

void bar(int done, int total, double ppl, double tps) {
    const int w = 30, f = total ? w * done / total : w;
    std::fprintf(stderr, "\r[%.*s%.*s] window %d/%d  ppl %.4f  %.1f tok/s ", f, "##############################",
                 w - f, "..............................", done, total, ppl, tps);
    std::fflush(stderr);
}
}  // namespace

std::shared_ptr<PerplexityCommand> add_perplexity_command(CLI::App &app, TextHooks hooks) {
    auto p = std::make_shared<PerplexityCommand>();
    p->hooks = hooks;
    p->sc = app.add_subcommand("perplexity",
                               "perplexity of a text file, as llama-perplexity: windows of --ctx tokens "
                               "(default 512), second half scored, 95% CI over windows");
    p->sc->add_option("model", p->model, "container directory (e.g. models/sluice-mini)")->required();
    p->file_pos = p->sc->add_option("file", p->file, "UTF-8 text file; - or a pipe: stdin");
    p->sc->add_option("--file,-f", p->file_opt, "the text file (instead of the positional)")->check(CLI::ExistingFile);
    p->sc->add_flag("--json", p->json, "print one JSON object on stdout instead of the report");
    p->sc->add_flag("--no-bos", p->no_bos, "keep each window's first token instead of replacing it by BOS");
    p->sc->add_option("--windows", p->max_windows, "score at most this many windows (0 = all)")
        ->check(CLI::Range(0, 1 << 30));
    p->sc->add_flag("--progress", p->progress, "a progress bar on stderr even when it is not a terminal");
    p->sc->add_flag("--no-progress", p->no_progress, "no progress bar");
    hooks.add_common(p->sc);
    return p;
}

bool run_perplexity_command(PerplexityCommand &p, int *rc) {
    if (!*p.sc) return false;
    *rc = 1;
    const int ctx_len = p.sc->count("--ctx") ? p.sc->get_option("--ctx")->as<int>() : 512;
    if (ctx_len < 4) {
        std::fprintf(stderr, "sluice perplexity: --ctx must be at least 4 (got %d)\n", ctx_len);
        *rc = 2;
        return true;
    }
    std::string text, err;
    const bool from_pos = p.file_pos->count() > 0 && p.file != "-";
    if (from_pos && !p.file_opt.empty()) {
        std::fprintf(stderr, "sluice perplexity: give the text once: FILE, or --file F\n");
        *rc = 2;
        return true;
    }
    if (from_pos) {
        if (!read_text(p.file, &text, &err)) {
            std::fprintf(stderr, "sluice perplexity: %s\n", err.c_str());
            return true;
        }
    } else {
        *rc = read_prompt(p.file, p.file_pos->count() > 0, p.file_opt, &text, &err);
        if (*rc != 0) {
            std::fprintf(stderr, "sluice perplexity: %s\n", err.c_str());
            return true;
        }
        *rc = 1;
        p.file = p.file_opt.empty() ? "stdin" : p.file_opt;
    }
    sluice_ctx *ctx = p.hooks.open(p.model, false);
    if (!ctx) return true;
    auto done = [&](int code) {
        sluice_close(ctx);
        *rc = code;
        return true;
    };
    std::vector<int32_t> toks(text.size() + 1);
    size_t n_tok = 0;
    sluice_status st = sluice_tokenize(ctx, text.data(), text.size(), toks.data(), toks.size(), &n_tok);
    if (st != SLUICE_OK) {
        std::fprintf(stderr, "sluice perplexity: %s: tokenizing: %s\n", p.file.c_str(), sluice_last_error(ctx));
        return done(1);
    }
    toks.resize(n_tok);
    int n_win = (int)(n_tok / (size_t)ctx_len);
    if (p.max_windows > 0 && p.max_windows < n_win) n_win = p.max_windows;
    if (n_win < 1) {
        std::fprintf(stderr, "sluice perplexity: %s: %zu tokens, fewer than one window of --ctx %d\n",
                     p.file.c_str(), n_tok, ctx_len);
        return done(1);
    }
    const int32_t bos = p.no_bos ? -1 : sluice_token_bos(ctx);
    const bool use_bos = bos >= 0 && bos < sluice_n_vocab(ctx);
    const size_t first = (size_t)ctx_len / 2;  // positions first..ctx-2 predict tokens first+1..ctx-1
    const bool show = !p.no_progress && !p.hooks.is_quiet() && (p.progress || ::isatty(2));
    std::vector<double> win_nll, nll(ctx_len);
    std::vector<uint64_t> win_n;
    const auto t0 = std::chrono::steady_clock::now();
    double sum = 0.0;
    uint64_t cnt = 0;
    for (int w = 0; w < n_win; w++) {
        std::vector<int32_t> win(toks.begin() + (size_t)w * ctx_len, toks.begin() + (size_t)(w + 1) * ctx_len);
        if (use_bos) win[0] = bos;
        if ((st = sluice_reset(ctx)) || (st = sluice_score(ctx, win.data(), win.size(), first, nll.data()))) {
            if (show) std::fprintf(stderr, "\n");
            std::fprintf(stderr, "sluice perplexity: window %d: %s: %s\n", w, sluice_status_name(st),
                         sluice_last_error(ctx));
            return done(1);
        }
        double s = 0.0;
        const size_t m = (size_t)ctx_len - 1 - first;
        for (size_t i = 0; i < m; i++) s += nll[i];
        win_nll.push_back(s);
        win_n.push_back(m);
        sum += s;
        cnt += m;
        if (show) {
            const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            bar(w + 1, n_win, std::exp(sum / (double)cnt), (double)(w + 1) * ctx_len / std::max(sec, 1e-9));
        }
    }
    if (show) std::fprintf(stderr, "\n");
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sluice_ppl_stats ps;
    sluice_ppl_summary(win_nll.data(), win_n.data(), win_nll.size(), &ps);
    const double tps = (double)n_win * ctx_len / std::max(sec, 1e-9);
    if (p.json) {
        nlohmann::json j;
        j["model"] = p.model;
        j["file"] = p.file;
        j["tokens_in_file"] = n_tok;
        j["ctx"] = ctx_len;
        j["windows"] = n_win;
        j["scored_per_window"] = win_n.empty() ? 0 : win_n[0];
        j["tokens_scored"] = ps.n_tokens;
        j["bos"] = use_bos;
        j["nll_mean"] = ps.nll_mean;
        j["nll_se"] = std::isfinite(ps.nll_se) ? nlohmann::json(ps.nll_se) : nlohmann::json(nullptr);
        j["ppl"] = ps.ppl;
        j["ppl_ci95"] = std::isfinite(ps.nll_se) ? nlohmann::json{ps.ppl_lo, ps.ppl_hi} : nlohmann::json(nullptr);
        j["seconds"] = sec;
        j["tokens_per_s"] = tps;
        j["window_nll"] = win_nll;
        std::printf("%s\n", j.dump(1).c_str());
    } else {
        std::printf("%s on %s: %d windows of %d tokens, second half scored (%llu tokens)%s\n", p.model.c_str(),
                    p.file.c_str(), n_win, ctx_len, (unsigned long long)ps.n_tokens,
                    use_bos ? ", BOS first" : "");
        if (std::isfinite(ps.nll_se))
            std::printf("PPL %.4f  95%% CI [%.4f, %.4f]  (NLL %.5f +- %.5f nats/token, windows as clusters)\n", ps.ppl,
                        ps.ppl_lo, ps.ppl_hi, ps.nll_mean, ps.nll_se);
        else
            std::printf("PPL %.4f  (NLL %.5f nats/token; one window: no interval)\n", ps.ppl, ps.nll_mean);
        std::printf("%.1f tokens/s (%d x %d tokens evaluated in %.2f s)\n", tps, n_win, ctx_len, sec);
    }
    return done(0);
}

}  // namespace sluice
