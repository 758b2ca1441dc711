#include "cli/cli_checks.h"
#include "cli/text_gen.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <random>

namespace sluice {

void SamplingOpts::add(CLI::App *app) {
    sluice_sampling_default(&p);
    // The defaults are shown in --help ("[0.8]"): capture them as registered.
    auto *defaults = app->option_defaults();
    const bool was = defaults->get_always_capture_default();
    defaults->always_capture_default();
    app->add_option("--temp", p.temperature, "temperature; 0 = greedy")->check(finite_number())->check(CLI::Range(0.0f, 100.0f));
    app->add_option("--top-k", p.top_k, "keep the K most likely tokens; 0 = off")->check(CLI::Range(0, 1 << 24));
    app->add_option("--top-p", p.top_p, "keep the smallest set with this probability mass; 1 = off")
        ->check(finite_number())->check(CLI::Range(1e-6f, 1.0f));
    app->add_option("--min-p", p.min_p, "drop tokens below this fraction of the top probability; 0 = off")
        ->check(finite_number())->check(CLI::Range(0.0f, 1.0f));
    app->add_option("--repeat-penalty", p.repeat_penalty, "penalise tokens seen in the last --repeat-last-n; 1 = off")
        ->check(finite_number())->check(CLI::Range(0.01f, 100.0f));
    app->add_option("--repeat-last-n", p.repeat_last_n, "history the penalty looks at; -1 = all, 0 = off")
        ->check(CLI::Range(-1, 1 << 24));
    defaults->always_capture_default(was);
    seed_opt = app->add_option("--seed", p.seed, "random seed (default: random, printed with the stats)")
                   ->check(unsigned_integer());
}

uint64_t SamplingOpts::resolve_seed() {
    if (!seed_opt || seed_opt->count() == 0) {
        std::random_device rd;
        p.seed = ((uint64_t)rd() << 32) ^ rd();
    }
    return p.seed;
}

StopFilter::StopFilter(std::vector<std::string> stops) {
    for (auto &s : stops)
        if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopFilter::push(const std::string &chunk) {
    if (stopped_) return {};
    held_ += chunk;
    size_t cut = std::string::npos;
    for (const std::string &s : stops_) cut = std::min(cut, held_.find(s));
    if (cut != std::string::npos) {
        stopped_ = true;
        std::string out = held_.substr(0, cut);
        held_.clear();
        return out;
    }
    // Hold back the longest tail that is a proper prefix of a stop string.
    size_t keep = 0;
    for (const std::string &s : stops_)
        for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; k--)
            if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
                keep = k;
                break;
            }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopFilter::finish() {
    std::string out = stopped_ ? std::string() : held_;
    held_.clear();
    return out;
}

const char *stop_reason_name(StopReason r) {
    switch (r) {
        case StopReason::limit: return "length limit";
        case StopReason::eos: return "end of sequence";
        case StopReason::stop_token: return "end of turn";
        case StopReason::stop_string: return "stop string";
        case StopReason::context_full: return "context full";
        case StopReason::error: return "error";
    }
    return "?";
}

GenResult generate(sluice_ctx *ctx, sluice_sampler *sampler, std::vector<float> &logits,
                   std::vector<int32_t> &history, const GenOptions &o, std::FILE *out) {
    GenResult r;
    const auto t0 = std::chrono::steady_clock::now();
    const int32_t eos = sluice_token_eos(ctx);
    const int32_t V = (int32_t)logits.size();
    StopFilter filter(o.stops);
    sluice_detok *dt = sluice_detok_new(ctx);
    if (!dt) {
        r.why = StopReason::error;
        r.error = sluice_last_error(ctx);
        return r;
    }
    std::string buf(sluice_detok_max_chunk(dt), '\0');
    auto emit = [&](const std::string &s) {
        if (s.empty()) return;
        r.text += s;
        std::fwrite(s.data(), 1, s.size(), out);
        std::fflush(out);
    };
    for (int i = 0; i < o.n_max; i++) {
        int32_t t = sluice_sampler_sample(sampler, logits.data(), V, history.data(), history.size());
        if (t < 0) {
            r.why = StopReason::error;
            r.error = "the sampler refused the logits";
            break;
        }
        r.ids.push_back(t);
        if (t == eos && !o.ignore_eos) {
            r.why = StopReason::eos;
            break;
        }
        // --ignore-eos covers every end-of-generation token, as llama.cpp's
        // does: a trained model ends its chat turn with the template's stop
        // token, and a benchmark asking for -n tokens must get -n.
        if (!o.ignore_eos && std::find(o.stop_tokens.begin(), o.stop_tokens.end(), t) != o.stop_tokens.end()) {
            r.why = StopReason::stop_token;
            break;
        }
        size_t n = 0;
        // An id with no text (a vocabulary slot the tokenizer does not
        // define) prints nothing.
        if ((o.print_control || !sluice_token_is_control(ctx, t)) &&
            sluice_detok_push(dt, t, buf.data(), buf.size(), &n) == SLUICE_OK)
            emit(filter.push(buf.substr(0, n)));
        if (filter.stopped()) {
            r.why = StopReason::stop_string;
            break;
        }
        if (i + 1 == o.n_max) break;  // the limit: no need to feed the last one
        if (o.interrupt && *o.interrupt) break;  // Ctrl-C: ends like the limit
        sluice_status st = sluice_eval(ctx, &t, 1, logits.data());
        if (st == SLUICE_E_RANGE) {
            r.why = StopReason::context_full;
            break;
        }
        if (st != SLUICE_OK) {
            r.why = StopReason::error;
            r.error = sluice_last_error(ctx);
            break;
        }
        history.push_back(t);
    }
    if (!filter.stopped()) {
        size_t n = 0;
        if (sluice_detok_flush(dt, buf.data(), buf.size(), &n) == SLUICE_OK) emit(filter.push(buf.substr(0, n)));
        emit(filter.finish());
    }
    sluice_detok_free(dt);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace sluice
