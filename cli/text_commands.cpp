// sluice run, tokenize, detokenize (and the registration of chat).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "common/checked_file.h"
#include "common/parse_number.h"
#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/images.h"
#include "cli/text_gen.h"
#include "sluice/sluice.h"

namespace sluice {

// The commands' arguments have external linkage: TextCommands (declared in
// commands.h) holds them, and GCC's -Wsubobject-linkage fires on a member of
// an anonymous-namespace type once the unity build includes this file.
struct RunArgs {
    std::string model, prompt, system;
    std::string json_schema;  // a file: constrain the output to JSON valid under it
    SamplingOpts sampling;
    int n = 256;
    std::vector<std::string> stops;
    bool raw = false, bos = false, stats = false, print_ids = false, special = false, ignore_eos = false;
    std::vector<std::string> images;
    std::string file;
    CLI::Option *prompt_opt = nullptr;
};

struct EvalArgs {
    std::string model, prompt, file;
    CLI::Option *prompt_opt = nullptr;
    std::vector<std::string> images;
    int top_k = 10;
    bool json = false, stats = false;
    std::string embeddings_out;
};

struct TokArgs {
    std::string model, text, file;
    CLI::Option *text_opt = nullptr;
    bool markup = false, json = false;
};

struct DetokArgs {
    std::string model;
    std::vector<std::string> ids;
};

namespace {

std::string read_stdin() {
    std::string s((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    return s;
}

void report(const char *cmd, sluice_ctx *ctx, sluice_status st) {
    std::fprintf(stderr, "sluice %s: %s: %s\n", cmd, sluice_status_name(st), sluice_last_error(ctx));
}

std::string join_ids(const std::vector<int32_t> &ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); i++) {
        if (i) s += ' ';
        s += std::to_string(ids[i]);
    }
    return s;
}

// Ids separated by commas and/or whitespace, in one or more arguments.
// The arguments (or stdin) as one list, through the parser --ids uses.
bool parse_id_list(const std::vector<std::string> &args, std::vector<int32_t> *ids, std::string *err) {
    std::string all;
    for (const std::string &a : args) all += a + " ";
    return sluice::parse_id_list(all, ids, err);
}

// The prompt from PROMPT, -, --file or a pipe; false (after saying why,
// *rc set) when there is none or it cannot be read.
bool resolve_prompt(const char *cmd, const std::string &arg, CLI::Option *opt, const std::string &file,
                    std::string *out, int *rc) {
    std::string err;
    *rc = read_prompt(arg, opt && opt->count() > 0, file, out, &err);
    if (*rc != 0) std::fprintf(stderr, "sluice %s: %s\n", cmd, err.c_str());
    return *rc == 0;
}

int cmd_run(RunArgs &a, const TextHooks &h) {
    if (int prc; !resolve_prompt("run", a.prompt, a.prompt_opt, a.file, &a.prompt, &prc)) return prc;
    uint64_t seed = a.sampling.resolve_seed();
    sluice_sampler *sampler = sluice_sampler_new(&a.sampling.p);
    if (!sampler) {
        std::fprintf(stderr, "sluice run: the sampling options are invalid\n");
        return 2;
    }
    sluice_ctx *ctx = h.open(a.model, !a.images.empty());
    if (!ctx) {
        sluice_sampler_free(sampler);
        return 1;
    }
    int rc = 0;
    auto finish = [&](int code) {
        if (h.before_close) h.before_close(ctx);
        sluice_sampler_free(sampler);
        sluice_close(ctx);
        return code;
    };
    std::vector<int32_t> prompt;
    GenOptions go;
    go.n_max = a.n;
    go.stops = a.stops;
    go.print_control = a.special;
    go.ignore_eos = a.ignore_eos;
    sluice_status st;
    // Images are encoded first; their media blocks go before the text.
    std::vector<QueuedImage> imgs;
    std::vector<int32_t> blocks;
    if (!queue_images(ctx, a.images, "run", false, &imgs)) return finish(1);
    if (a.raw && !image_blocks(ctx, imgs, "run", &blocks)) return finish(1);
    if (a.raw) {
        // Plain text the model continues: content mode, no template.
        st = fill_all(prompt, a.prompt.size() + 1, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_tokenize(ctx, a.prompt.data(), a.prompt.size(), o, cap, n);
        });
        prompt.insert(prompt.begin(), blocks.begin(), blocks.end());
        if (st == SLUICE_OK && (a.bos || prompt.empty())) {
            int32_t bos = sluice_token_bos(ctx);
            if (bos < 0 || bos >= sluice_n_vocab(ctx)) {
                std::fprintf(stderr, "sluice run: %s\n",
                             prompt.empty() ? "the prompt is empty and the model has no usable BOS token"
                                            : "the model has no usable BOS token");
                return finish(1);
            }
            prompt.insert(prompt.begin(), bos);
        }
    } else {
        std::vector<sluice_chat_message> msgs;
        if (!a.system.empty()) msgs.push_back({"system", a.system.c_str()});
        msgs.push_back({"user", a.prompt.c_str()});
        if (imgs.empty()) {
            st = fill_all(prompt, a.prompt.size() + 64, [&](int32_t *o, size_t cap, size_t *n) {
                return sluice_chat_render(ctx, msgs.data(), msgs.size(), 1, o, cap, n);
            });
        } else {
            // The user turn: one media block per image, then the text.
            const std::vector<sluice_chat_part> sys = {{a.system.data(), a.system.size(), 0, 0}};
            const std::vector<sluice_chat_part> user = image_parts(imgs, a.prompt);
            std::vector<sluice_chat_message_parts> pm;
            if (!a.system.empty()) pm.push_back({"system", sys.data(), sys.size()});
            pm.push_back({"user", user.data(), user.size()});
            st = fill_all(prompt, a.prompt.size() + 256, [&](int32_t *o, size_t cap, size_t *n) {
                return sluice_chat_render_parts(ctx, pm.data(), pm.size(), 1, o, cap, n);
            });
        }
        if (st == SLUICE_OK) {
            int32_t stop_tok = sluice_chat_stop_token(ctx);
            if (stop_tok >= 0)
                go.stop_tokens.push_back(stop_tok);
            else if (*sluice_chat_stop(ctx))
                go.stops.push_back(sluice_chat_stop(ctx));
        }
    }
    if (st != SLUICE_OK) {
        report("run", ctx, st);
        if (st == SLUICE_E_UNSUPPORTED && !a.raw && sluice_token_eos(ctx) >= 0) std::fprintf(stderr, "sluice run: (--raw skips the chat template)\n");
        return finish(1);
    }
    if (!expand_images(ctx, "run", &prompt)) return finish(1);
    if (!a.json_schema.empty()) {
        std::string schema;
        if (sluice::Status rs = sluice::read_input_file(a.json_schema, 64u << 20, &schema); !rs) {
            std::fprintf(stderr, "sluice run: --json-schema: %s\n", rs.message().c_str());
            return finish(1);
        }
        // The output ends at the first end token after a complete value.
        std::vector<int32_t> ends = go.stop_tokens;
        if (sluice_token_eos(ctx) >= 0) ends.push_back(sluice_token_eos(ctx));
        st = sluice_sampler_set_json_schema(sampler, ctx, schema.data(), schema.size(), ends.data(), ends.size());
        if (st != SLUICE_OK) {
            std::fprintf(stderr, "sluice run: %s: %s\n", a.json_schema.c_str(), sluice_last_error(ctx));
            return finish(1);
        }
    }
    const int V = sluice_n_vocab(ctx);
    std::vector<float> logits((size_t)V);
    auto t0 = std::chrono::steady_clock::now();
    st = sluice_eval(ctx, prompt.data(), prompt.size(), logits.data());
    const double t_prompt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (st != SLUICE_OK) {
        report("run", ctx, st);
        return finish(1);
    }
    std::vector<int32_t> history = prompt;
    GenResult r = generate(ctx, sampler, logits, history, go, stdout);
    if (::isatty(1) && (r.text.empty() || r.text.back() != '\n')) std::fputc('\n', stdout);
    std::fflush(stdout);
    // The statistics start on their own line when stderr shares stdout's file.
    const char *nl = newline_if_mid_line(::isatty(1) || r.text.empty() || r.text.back() == '\n');
    if (r.why == StopReason::error) {
        std::fprintf(stderr, "%ssluice run: %s\n", nl, r.error.c_str());
        nl = "";
        rc = 1;
    }
    if (h.is_quiet()) {
        if (a.print_ids) std::fprintf(stderr, "ids: %s\n", join_ids(r.ids).c_str());
        return finish(rc);
    }
    sluice_stats s{};
    sluice_stats_get(ctx, &s);
    const uint64_t acc = s.expert_cache_hits + s.expert_cache_misses;
    const size_t n_gen = r.ids.size();
    std::fprintf(stderr,
                 "%ssluice run: prompt %zu tokens in %.3f s (%.1f tok/s); generated %zu tokens in %.3f s (%.1f tok/s), "
                 "stop: %s; expert cache %llu hits, %llu misses (%.1f%%); seed %llu\n",
                 nl, prompt.size(), t_prompt, prompt.size() / std::max(t_prompt, 1e-9), n_gen, r.seconds,
                 n_gen / std::max(r.seconds, 1e-9), stop_reason_name(r.why), (unsigned long long)s.expert_cache_hits,
                 (unsigned long long)s.expert_cache_misses, acc ? 100.0 * s.expert_cache_hits / acc : 0.0,
                 (unsigned long long)seed);
    if (s.images_encoded)
        std::fprintf(stderr, "sluice run: vision: %llu images in %.3f s\n", (unsigned long long)s.images_encoded,
                     s.seconds_vision);
    if (a.print_ids) std::fprintf(stderr, "ids: %s\n", join_ids(r.ids).c_str());
    if (a.stats && h.print_stats) h.print_stats(ctx);
    return finish(rc);
}

// sluice eval: the untemplated form. The media blocks, then the prompt in
// markup mode ("I wrote this string myself", as the reference CLI does);
// prints the top-k logits of the last position.
int cmd_eval(EvalArgs &a, const TextHooks &h) {
    if (int prc; !resolve_prompt("eval", a.prompt, a.prompt_opt, a.file, &a.prompt, &prc)) return prc;
    sluice_ctx *ctx = h.open(a.model, !a.images.empty());
    if (!ctx) return 1;
    auto finish = [&](int code) {
        if (h.before_close) h.before_close(ctx);
        sluice_close(ctx);
        return code;
    };
    std::vector<QueuedImage> imgs;
    std::vector<int32_t> ids, text;
    if (!queue_images(ctx, a.images, "eval", a.json, &imgs)) return finish(1);
    if (!image_blocks(ctx, imgs, "eval", &ids)) return finish(1);
    if (!a.embeddings_out.empty()) {
        // The image embeddings as little-endian float32 rows (tools/oracle/vision.py reads them).
        std::vector<float> rows;
        sluice_status es = fill_all(rows, 1024, [&](float *o, size_t cap, size_t *n) {
            return sluice_image_embeddings(ctx, o, cap, n);
        });
        sluice::Status ws = es == SLUICE_OK ? sluice::write_output_file(a.embeddings_out,
                                                                       std::string_view((const char *)rows.data(), rows.size() * 4), false)
                                             : sluice::io_error(a.embeddings_out + ": no image embeddings to write");
        if (!ws) {
            std::fprintf(stderr, "sluice eval: %s\n", ws.message().c_str());
            return finish(1);
        }
    }
    sluice_status st = fill_all(text, a.prompt.size() + 1, [&](int32_t *o, size_t cap, size_t *n) {
        return sluice_tokenize_markup(ctx, a.prompt.data(), a.prompt.size(), o, cap, n);
    });
    if (st != SLUICE_OK) {
        report("eval", ctx, st);
        return finish(1);
    }
    ids.insert(ids.end(), text.begin(), text.end());
    if (ids.empty()) {
        std::fprintf(stderr, "sluice eval: the prompt is empty\n");
        return finish(2);
    }
    if (!expand_images(ctx, "eval", &ids)) return finish(1);
    std::vector<float> logits((size_t)sluice_n_vocab(ctx));
    st = sluice_eval(ctx, ids.data(), ids.size(), logits.data());
    if (st != SLUICE_OK) {
        report("eval", ctx, st);
        return finish(1);
    }
    std::vector<int32_t> order(logits.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = (int32_t)i;
    const size_t k = std::min(order.size(), (size_t)std::max(a.top_k, 1));
    std::partial_sort(order.begin(), order.begin() + (long)k, order.end(), [&](int32_t x, int32_t y) {
        return logits[(size_t)x] > logits[(size_t)y] || (logits[(size_t)x] == logits[(size_t)y] && x < y);
    });
    // The next-token distribution: softmax over every logit (in double, from
    // the largest), so probabilities are those of the full vocabulary.
    double z = 0;
    const double mx = logits[(size_t)order[0]];
    for (float v : logits) z += std::exp((double)v - mx);
    auto prob = [&](int32_t id) { return std::exp((double)logits[(size_t)id] - mx) / z; };
    auto text_of = [&](int32_t id) {
        std::vector<char> t;
        if (fill_all(t, 32, [&](char *o, size_t cap, size_t *n) { return sluice_detokenize(ctx, &id, 1, o, cap, n); }) !=
            SLUICE_OK)
            return std::string();
        return std::string(t.begin(), t.end());
    };
    if (a.json) {
        std::printf("{\"n_prompt\": %zu, \"images\": %zu, \"top\": [", ids.size(), imgs.size());
        for (size_t i = 0; i < k; i++)
            std::printf("%s{\"id\": %d, \"text\": %s, \"prob\": %.6g, \"logit\": %.6f}", i ? ", " : "", order[i],
                        json_quote(text_of(order[i])).c_str(), prob(order[i]), logits[(size_t)order[i]]);
        std::printf("]}\n");
    } else {
        std::printf("prompt: %zu tokens (%zu images)\n", ids.size(), imgs.size());
        std::printf("%8s  %-24s %10s %10s\n", "token", "text", "prob", "logit");
        for (size_t i = 0; i < k; i++)
            std::printf("%8d  %-24s %10.6f %10.4f\n", order[i], json_quote(text_of(order[i])).c_str(), prob(order[i]),
                        logits[(size_t)order[i]]);
    }
    if (a.stats && h.print_stats) h.print_stats(ctx);
    return finish(0);
}

int cmd_tokenize(TokArgs &a, const TextHooks &h) {
    std::string text;
    if (int prc; !resolve_prompt("tokenize", a.text, a.text_opt, a.file, &text, &prc)) return prc;
    sluice_ctx *ctx = h.open_metadata ? h.open_metadata(a.model) : h.open(a.model, false);
    if (!ctx) return 1;
    std::vector<int32_t> ids;
    sluice_status st = fill_all(ids, text.size() + 1, [&](int32_t *o, size_t cap, size_t *n) {
        return a.markup ? sluice_tokenize_markup(ctx, text.data(), text.size(), o, cap, n)
                        : sluice_tokenize(ctx, text.data(), text.size(), o, cap, n);
    });
    int rc = 0;
    if (st != SLUICE_OK) {
        report("tokenize", ctx, st);
        rc = 1;
    } else if (a.json) {
        std::printf("{\"n_tokens\": %zu, \"ids\": [", ids.size());
        for (size_t i = 0; i < ids.size(); i++) std::printf("%s%d", i ? ", " : "", ids[i]);
        std::printf("], \"pieces\": [");
        for (size_t i = 0; i < ids.size(); i++) {
            std::vector<char> t;
            fill_all(t, 32, [&](char *o, size_t cap, size_t *n) { return sluice_detokenize(ctx, &ids[i], 1, o, cap, n); });
            std::printf("%s%s", i ? ", " : "", json_quote(std::string(t.begin(), t.end())).c_str());
        }
        std::printf("]}\n");
    } else {
        std::printf("%s\n", join_ids(ids).c_str());
    }
    sluice_close(ctx);
    return rc;
}

int cmd_detokenize(DetokArgs &a, const TextHooks &h) {
    std::vector<int32_t> ids;
    std::string err;
    std::vector<std::string> args = a.ids;
    if (args.empty()) args.push_back(read_stdin());
    if (!parse_id_list(args, &ids, &err)) {
        std::fprintf(stderr, "sluice detokenize: %s\n", err.c_str());
        return 2;
    }
    sluice_ctx *ctx = h.open_metadata ? h.open_metadata(a.model) : h.open(a.model, false);
    if (!ctx) return 1;
    std::vector<char> text;
    sluice_status st = fill_all(text, ids.size() * 8, [&](char *o, size_t cap, size_t *n) {
        return sluice_detokenize(ctx, ids.data(), ids.size(), o, cap, n);
    });
    int rc = 0;
    if (st != SLUICE_OK) {
        report("detokenize", ctx, st);
        rc = 1;
    } else {
        std::fwrite(text.data(), 1, text.size(), stdout);
    }
    sluice_close(ctx);
    return rc;
}

}  // namespace

struct TextCommands {
    TextHooks hooks;
    RunArgs run;
    EvalArgs eval;
    ChatArgs chat;
    TokArgs tok;
    DetokArgs detok;
    CLI::App *eval_cmd = nullptr;
    CLI::App *run_cmd = nullptr, *chat_cmd = nullptr, *tok_cmd = nullptr, *detok_cmd = nullptr;
};

std::shared_ptr<TextCommands> add_text_commands(CLI::App &app, TextHooks hooks) {
    auto t = std::make_shared<TextCommands>();
    t->hooks = std::move(hooks);

    RunArgs &r = t->run;
    auto *run = app.add_subcommand("run", "generate text from a prompt (chat template unless --raw)");
    run->add_option("model", r.model, "container directory")->required();
    r.prompt_opt = run->add_option("prompt", r.prompt,
                                   "the prompt (a user message; with --raw, text to continue); - or a pipe: stdin");
    run->add_option("--file,-f", r.file, "read the prompt from this file")->check(CLI::ExistingFile);
    run->add_flag("--ignore-eos", r.ignore_eos, "keep generating past end-of-sequence and end-of-turn tokens (benchmarks)");
    run->add_option("-n", r.n, "tokens to generate at most (default 256)")->check(CLI::Range(0, 1 << 24));
    run->add_option("--stop", r.stops, "stop when the text contains this string (repeatable)");
    run->add_option("--system", r.system, "a system message (chat mode)");
    run->add_flag("--raw", r.raw, "no chat template: the model continues the prompt text");
    run->add_flag("--bos", r.bos, "with --raw: start with the BOS token");
    run->add_flag("--stats", r.stats, "print expert cache and I/O statistics");
    run->add_flag("--print-ids", r.print_ids, "print the generated token ids on stderr");
    run->add_flag("--special", r.special, "print control tokens' text too");
    run->add_option("--image", r.images, "an image for the prompt (PNG, JPEG, ...; repeatable; Kimi K3)")
        ->check(CLI::ExistingFile);
    run->add_option("--json-schema", r.json_schema,
                    "constrain the output to JSON valid under this JSON Schema file (constrained decoding)");
    r.sampling.add(run);
    t->hooks.add_common(run);
    t->run_cmd = run;

    EvalArgs &e = t->eval;
    auto *ev = app.add_subcommand("eval", "the next-token distribution after a prompt: token, text, probability, logit");
    ev->add_option("model", e.model, "container directory")->required();
    e.prompt_opt = ev->add_option("prompt", e.prompt, "the prompt; special-token strings become their ids; - or a pipe: stdin");
    ev->add_option("--file,-f", e.file, "read the prompt from this file")->check(CLI::ExistingFile);
    ev->add_option("--image", e.images, "an image, placed before the prompt (repeatable; Kimi K3)")
        ->check(CLI::ExistingFile);
    ev->add_option("--top-k", e.top_k, "tokens to print (default 10)")->check(CLI::Range(1, 1 << 20));
    ev->add_flag("--json", e.json, "print JSON");
    ev->add_option("--embeddings-out", e.embeddings_out, "write the images' embeddings here (float32 rows)");
    ev->add_flag("--stats", e.stats, "print expert cache, I/O and vision statistics");
    t->hooks.add_common(ev);
    t->eval_cmd = ev;

    ChatArgs &c = t->chat;
    auto *chat = app.add_subcommand(
        "chat", "interactive chat on stdin; commands: /reset, /stats, /save FILE, /load FILE, /quit");
    chat->add_option("model", c.model, "container directory")->required();
    chat->add_option("-n", c.n_max, "tokens per reply at most (default 1024)")->check(CLI::Range(1, 1 << 24));
    chat->add_option("--system", c.system, "a system message opening the conversation");
    chat->add_flag("--print-ids", c.print_ids, "print each reply's token ids on stderr");
    chat->add_flag("--vision", c.vision, "load the vision tower: /image FILE attaches an image (Kimi K3)");
    c.sampling.add(chat);
    t->hooks.add_common(chat);
    t->chat_cmd = chat;

    TokArgs &k = t->tok;
    auto *tk = app.add_subcommand("tokenize", "print the token ids of TEXT (or of stdin; the trunk is not loaded)");
    tk->add_option("model", k.model, "container directory")->required();
    k.text_opt = tk->add_option("text", k.text, "text to tokenize; - or a pipe: stdin");
    tk->add_option("--file,-f", k.file, "read the text from this file")->check(CLI::ExistingFile);
    tk->add_flag("--markup", k.markup, "special-token strings become their ids");
    tk->add_flag("--json", k.json, "print JSON: the ids and each token's text");
    t->hooks.add_common(tk);
    t->tok_cmd = tk;

    DetokArgs &d = t->detok;
    auto *dk = app.add_subcommand("detokenize", "print the text of token ids (or of ids on stdin; the trunk is not loaded)");
    dk->add_option("model", d.model, "container directory")->required();
    dk->add_option("ids", d.ids, "token ids, separated by spaces or commas");
    t->hooks.add_common(dk);
    t->detok_cmd = dk;
    return t;
}

bool run_text_command(TextCommands &t, int *rc) {
    if (*t.run_cmd) return *rc = cmd_run(t.run, t.hooks), true;
    if (*t.chat_cmd) return *rc = cmd_chat(t.chat, t.hooks), true;
    if (*t.eval_cmd) return *rc = cmd_eval(t.eval, t.hooks), true;
    if (*t.tok_cmd) return *rc = cmd_tokenize(t.tok, t.hooks), true;
    if (*t.detok_cmd) return *rc = cmd_detokenize(t.detok, t.hooks), true;
    return false;
}

}  // namespace sluice
