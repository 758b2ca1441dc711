// `sluice kld ...`: the KLD suite (src/kld, options in cli/kld) wired to the engine and the
// tokenizer through the public C API only.
#include <iostream>
#include <unistd.h>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/kld/kld_main.h"
#include "sluice/sluice.h"

namespace sluice {
namespace {

using kld::Code;

class CapiEngine final : public kld::LogitsEngine {
public:
    explicit CapiEngine(sluice_ctx *ctx, std::string path) : ctx_(ctx), path_(std::move(path)) {}
    ~CapiEngine() override { sluice_close(ctx_); }
    int64_t n_vocab() override { return sluice_n_vocab(ctx_); }
    Status reset() override {
        return sluice_reset(ctx_) == SLUICE_OK ? Status() : kld::err(Code::engine, sluice_last_error(ctx_));
    }
    Status eval(const int32_t *tokens, size_t n, float *logits) override {
        if (sluice_eval_all(ctx_, tokens, n, logits) != SLUICE_OK)
            return kld::err(Code::engine, path_ + ": " + sluice_last_error(ctx_));
        return Status();
    }
    kld::json identity() override {
        sluice_info in;
        kld::json j = kld::json::object();
        if (sluice_info_get(ctx_, &in) != SLUICE_OK) return j;
        j["engine"] = "sluice " SLUICE_VERSION_STRING;
        j["container"] = path_;
        j["family"] = in.family;
        j["trunk_formats"] = in.trunk_formats;
        j["expert_format"] = in.expert_format;
        j["backend"] = in.backend;
        j["threads"] = in.n_threads;
        return j;
    }
    std::map<std::string, std::string> extra_metadata() override {
        return {{"sluice_version", SLUICE_VERSION_STRING}, {"model_container", path_}};
    }

private:
    sluice_ctx *ctx_;
    std::string path_;
};

Status open_ctx(const std::string &path, int threads, sluice_ctx **out) {
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.n_threads = threads;
    cfg.max_context = 1 << 16;  // suite windows are long
    sluice_ctx *ctx = nullptr;
    if (sluice_open(path.c_str(), &cfg, &ctx) != SLUICE_OK) {
        Status st = kld::err(Code::engine, path + ": " + sluice_last_error(ctx));
        sluice_close(ctx);
        return st;
    }
    *out = ctx;
    return Status();
}

}  // namespace

int run_kld(int argc, char **argv) {
    kld::KldHooks hooks;
    hooks.open_engine = [](const std::string &c, int threads, std::unique_ptr<kld::LogitsEngine> *out) {
        sluice_ctx *ctx = nullptr;
        Status st = open_ctx(c, threads, &ctx);
        if (!st.is_ok()) return st;
        *out = std::make_unique<CapiEngine>(ctx, c);
        return Status();
    };
    hooks.open_tokenizer = [](const std::string &c, kld::TokenizeFn *out, std::string *cls) {
        sluice_ctx *raw = nullptr;
        Status st = open_ctx(c, 1, &raw);
        if (!st.is_ok()) return st;
        std::shared_ptr<sluice_ctx> ctx(raw, sluice_close);
        *cls = "sluice tiktoken BPE (" + c + ")";
        *out = [ctx, c](const std::string &text, std::vector<int32_t> *ids) {
            size_t n = 0;
            ids->resize(text.size() + 16);
            sluice_status s = sluice_tokenize(ctx.get(), text.data(), text.size(), ids->data(), ids->size(), &n);
            if (s == SLUICE_E_RANGE) {
                ids->resize(n);
                s = sluice_tokenize(ctx.get(), text.data(), text.size(), ids->data(), ids->size(), &n);
            }
            if (s != SLUICE_OK) return kld::err(Code::engine, c + ": " + sluice_last_error(ctx.get()));
            ids->resize(n);
            return Status();
        };
        return Status();
    };
    hooks.err_is_tty = ::isatty(STDERR_FILENO) != 0;
    return kld::main_kld(argc, argv, std::cout, std::cerr, hooks);
}

}  // namespace sluice
