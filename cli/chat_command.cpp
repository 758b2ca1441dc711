// sluice chat: a REPL over stdin (a terminal, with line editing and history,
// or a pipe).
//
// The model's session holds every token of the conversation; each user line
// feeds only what is new: the close of the previous assistant turn (the
// part of the assistant suffix the model did not produce), then the user
// message and the assistant opening. /save writes the session state
// (sluice_state_save) to FILE and the conversation to FILE.json; /load
// restores both, so the conversation continues exactly as it would have.
// Each reply draws from a sampler seeded by (seed, position), so a loaded
// session samples the same tokens as the one that was saved.
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/images.h"
#include "cli/line_editor.h"
#include "common/checked_file.h"
#include "cli/text_gen.h"

namespace sluice {

namespace {

// Ctrl-C: during a reply it ends the reply (the session and conversation
// stay); at the prompt it ends the chat with exit 0. The handler only sets
// the flag; without SA_RESTART the blocked read at the prompt returns EINTR.
volatile std::sig_atomic_t g_interrupted = 0;
void on_sigint(int) { g_interrupted = 1; }

struct Conversation {
    std::vector<int32_t> history;  // fed to the model (= sluice_n_past)
    std::vector<int32_t> pending;  // to feed before the next user message
    nlohmann::json messages = nlohmann::json::array();
    void clear() {
        history.clear();
        pending.clear();
        messages = nlohmann::json::array();
    }
};

struct Chat {
    sluice_ctx *ctx;
    ChatArgs &a;
    const TextHooks &h;
    Conversation conv;
    std::vector<int32_t> begin;   // markup opening a conversation (render of no messages)
    std::vector<int32_t> suffix;  // the assistant suffix (closes a reply)
    int32_t stop_token = -1;
    std::string stop_text;
    std::vector<std::string> attached;  // /image files for the next message

    bool render(const std::vector<sluice_chat_message> &m, int add_open, std::vector<int32_t> *out) {
        sluice_status st = fill_all(*out, 64, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_chat_render(ctx, m.data(), m.size(), add_open, o, cap, n);
        });
        if (st != SLUICE_OK) {
            std::fprintf(stderr, "sluice chat: %s: %s\n", sluice_status_name(st), sluice_last_error(ctx));
            return false;
        }
        return true;
    }

    bool init() {
        if (!render({}, 0, &begin)) return false;
        stop_token = sluice_chat_stop_token(ctx);
        stop_text = sluice_chat_stop(ctx);
        sluice_status st = fill_all(suffix, 16, [&](int32_t *o, size_t cap, size_t *n) {
            return sluice_tokenize_markup(ctx, stop_text.data(), stop_text.size(), o, cap, n);
        });
        if (st != SLUICE_OK) {
            std::fprintf(stderr, "sluice chat: %s\n", sluice_last_error(ctx));
            return false;
        }
        return true;
    }

    void reset() {
        sluice_reset(ctx);
        sluice_image_clear(ctx);
        attached.clear();
        conv.clear();
    }

    // The tokens that close a reply, given how it ended (its last sampled
    // token was never fed to the model). A reply the model ended with a
    // token of the assistant suffix gets the rest of the suffix after it; an
    // EOS outside the suffix is replaced by the suffix; a reply cut short
    // keeps its last token and gets the whole suffix.
    std::vector<int32_t> close_reply(const GenResult &r) {
        if (r.ids.empty()) return suffix;
        const int32_t last = r.ids.back();
        const bool ended = r.why == StopReason::stop_token || r.why == StopReason::eos;
        auto at = std::find(suffix.rbegin(), suffix.rend(), last);
        if (ended && at != suffix.rend()) {
            std::vector<int32_t> out{last};
            out.insert(out.end(), at.base(), suffix.end());
            return out;
        }
        std::vector<int32_t> out;
        if (!ended) out.push_back(last);
        out.insert(out.end(), suffix.begin(), suffix.end());
        return out;
    }

    bool turn(const std::string &text) {
        std::vector<sluice_chat_message> msgs;
        const bool first = conv.history.empty() && conv.pending.empty();
        if (first && !a.system.empty()) msgs.push_back({"system", a.system.c_str()});
        msgs.push_back({"user", text.c_str()});
        std::vector<int32_t> rendered;
        // Attached images are encoded now; a failure abandons the turn and
        // leaves nothing queued (queue_images clears what it added).
        std::vector<QueuedImage> imgs;
        const std::vector<std::string> files = std::move(attached);
        attached.clear();
        if (!queue_images(ctx, files, "chat", false, &imgs)) return false;
        if (imgs.empty()) {
            if (!render(msgs, 1, &rendered)) return false;
        } else {
            const std::vector<sluice_chat_part> user = image_parts(imgs, text);
            std::vector<sluice_chat_part> sys;
            std::vector<sluice_chat_message_parts> pm;
            for (const sluice_chat_message &m : msgs)
                if (std::string(m.role) == "system") sys.push_back({m.content, std::strlen(m.content), 0, 0});
            if (!sys.empty()) pm.push_back({"system", sys.data(), sys.size()});
            pm.push_back({"user", user.data(), user.size()});
            sluice_status st = fill_all(rendered, 256, [&](int32_t *o, size_t cap, size_t *n) {
                return sluice_chat_render_parts(ctx, pm.data(), pm.size(), 1, o, cap, n);
            });
            if (st != SLUICE_OK) {
                std::fprintf(stderr, "sluice chat: %s: %s\n", sluice_status_name(st), sluice_last_error(ctx));
                sluice_image_clear(ctx);
                return false;
            }
        }
        std::vector<int32_t> feed = conv.pending;
        // Segments are encoded one by one, so the opening is a prefix.
        size_t skip = first ? 0 : begin.size();
        feed.insert(feed.end(), rendered.begin() + (ptrdiff_t)skip, rendered.end());
        if (!expand_images(ctx, "chat", &feed)) {
            sluice_image_clear(ctx);
            return false;
        }
        std::vector<float> logits((size_t)sluice_n_vocab(ctx));
        sluice_status st = sluice_eval(ctx, feed.data(), feed.size(), logits.data());
        if (st != SLUICE_OK) {
            std::fprintf(stderr, "sluice chat: %s: %s%s\n", sluice_status_name(st), sluice_last_error(ctx),
                         st == SLUICE_E_RANGE ? " (/reset starts over)" : "");
            if (st != SLUICE_E_RANGE && st != SLUICE_E_ARG) reset();
            sluice_image_clear(ctx);
            return false;
        }
        conv.history.insert(conv.history.end(), feed.begin(), feed.end());
        conv.pending.clear();
        conv.messages.push_back({{"role", "user"}, {"content", text}});

        sluice_sampling p = a.sampling.p;
        p.seed = a.sampling.p.seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(conv.history.size() + 1));
        sluice_sampler *sampler = sluice_sampler_new(&p);
        GenOptions go;
        go.n_max = a.n_max;
        // Not reset here: a Ctrl-C pressed after Enter, while the prompt is
        // prefilled, means "stop this reply" and was lost when the flag was
        // cleared after the prefill (chat_pty failed in CI under load). The
        // main loop clears it before each read.
        go.interrupt = &g_interrupted;
        if (stop_token >= 0)
            go.stop_tokens.push_back(stop_token);
        else if (!stop_text.empty())
            go.stops.push_back(stop_text);
        GenResult r = generate(ctx, sampler, logits, conv.history, go, stdout);
        sluice_sampler_free(sampler);
        if (g_interrupted) std::fprintf(stderr, "\n(reply stopped)");
        g_interrupted = 0;
        std::fputc('\n', stdout);
        std::fflush(stdout);
        conv.messages.push_back({{"role", "assistant"}, {"content", r.text}});
        if (a.print_ids) {
            std::string s;
            for (int32_t id : r.ids) s += (s.empty() ? "" : " ") + std::to_string(id);
            std::fprintf(stderr, "ids: %s\n", s.c_str());
        }
        if (r.why == StopReason::error) {
            std::fprintf(stderr, "sluice chat: %s\n", r.error.c_str());
            reset();
            return false;
        }
        conv.pending = close_reply(r);
        if (r.why == StopReason::context_full) std::fprintf(stderr, "sluice chat: the context is full (/reset)\n");
        return true;
    }

    bool save(const std::string &path) {
        sluice_status st = sluice_state_save(ctx, path.c_str());
        if (st != SLUICE_OK) {
            std::fprintf(stderr, "sluice chat: /save: %s\n", sluice_last_error(ctx));
            return false;
        }
        nlohmann::json j = {{"format", "sluice-chat-v1"},
                            {"history", conv.history},
                            {"pending", conv.pending},
                            {"messages", conv.messages}};
        const std::string jp = path + ".json";
        if (sluice::Status ws = sluice::write_output_file(
                jp, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
            !ws) {
            std::fprintf(stderr, "sluice chat: /save: %s\n", ws.message().c_str());
            return false;
        }
        std::fprintf(stderr, "saved %zu tokens to %s (+ .json)\n", conv.history.size(), path.c_str());
        return true;
    }

    bool load(const std::string &path) {
        Conversation c;
        const std::string jp = path + ".json";
        try {
            std::string text;
            if (sluice::Status rs = sluice::read_input_file(jp, 1u << 30, &text); !rs)
                throw std::runtime_error(rs.message());
            nlohmann::json j = nlohmann::json::parse(text);
            if (j.value("format", "") != "sluice-chat-v1") throw std::runtime_error(jp + ": not a sluice chat file");
            c.history = j.at("history").get<std::vector<int32_t>>();
            c.pending = j.at("pending").get<std::vector<int32_t>>();
            c.messages = j.at("messages");
        } catch (const std::exception &e) {
            std::fprintf(stderr, "sluice chat: /load: %s\n", e.what());
            return false;
        }
        sluice_status st = sluice_state_load(ctx, path.c_str());
        if (st != SLUICE_OK) {
            // A refused state file leaves the session as it was (sluice.h;
            // fuzz_session checks it), so the conversation can go on.
            std::fprintf(stderr, "sluice chat: /load: %s; the conversation goes on\n", sluice_last_error(ctx));
            return false;
        }
        if ((size_t)sluice_n_past(ctx) != c.history.size()) {
            std::fprintf(stderr, "sluice chat: /load: %s holds %d positions but %s lists %zu tokens; starting over\n",
                         path.c_str(), sluice_n_past(ctx), jp.c_str(), c.history.size());
            reset();
            return false;
        }
        conv = std::move(c);
        std::fprintf(stderr, "loaded %zu tokens from %s\n", conv.history.size(), path.c_str());
        return true;
    }
};

// One line from stdin by read(2), so an interrupted read (EINTR) returns
// at once instead of being retried inside iostreams. false at EOF or on
// an interrupt with nothing typed.
bool read_line(std::string *line) {
    line->clear();
    for (;;) {
        char c;
        const ssize_t n = ::read(0, &c, 1);
        if (n == 1) {
            if (c == '\n') return true;
            line->push_back(c);
            continue;
        }
        if (n < 0 && errno == EINTR) {
            if (g_interrupted) return false;
            continue;
        }
        return !line->empty();  // EOF: a last line without a newline still counts
    }
}

std::string arg_of(const std::string &line) {
    size_t sp = line.find(' ');
    if (sp == std::string::npos) return {};
    std::string s = line.substr(sp + 1);
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
}

}  // namespace

int cmd_chat(ChatArgs &a, const TextHooks &h) {
    a.sampling.resolve_seed();
    {
        sluice_sampler *probe = sluice_sampler_new(&a.sampling.p);
        if (!probe) {
            std::fprintf(stderr, "sluice chat: the sampling options are invalid\n");
            return 2;
        }
        sluice_sampler_free(probe);
    }
    sluice_ctx *ctx = h.open(a.model, a.vision);
    if (!ctx) return 1;
    Chat chat{ctx, a, h, {}, {}, {}, -1, {}, {}};
    if (!chat.init()) {
        sluice_close(ctx);
        return 1;
    }
    const bool tty = ::isatty(0);
    if (tty)
        std::fprintf(stderr, "sluice chat: seed %llu; /reset, /stats, /save FILE, /load FILE, /quit\n",
                     (unsigned long long)a.sampling.p.seed);
    struct sigaction sa {}, old_sa{};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: Ctrl-C at the prompt must interrupt the read
    sigaction(SIGINT, &sa, &old_sa);
    // At a terminal: line editing and history (libedit). Piped input keeps
    // the plain reads, byte for byte as before (the tests pipe their input).
    std::unique_ptr<LineEditor> editor;
    if (tty) {
        editor = std::make_unique<LineEditor>();
        if (!editor->ok()) editor.reset();
    }
    std::string line;
    int rc = 0;
    for (;;) {
        if (tty && !editor) {
            std::fputs("> ", stdout);
            std::fflush(stdout);
        }
        g_interrupted = 0;
        if (!(editor ? editor->read_line("> ", &line) : read_line(&line))) {
            if (g_interrupted) {
                rc = 0;  // Ctrl-C at the prompt: a normal end
                if (tty) std::fputc('\n', stdout);
            }
            break;
        }
        if (editor) editor->remember(line);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        if (line[0] == '/' && line.compare(0, 2, "//") != 0) {
            std::string cmd = line.substr(0, line.find(' '));
            std::string arg = arg_of(line);
            if (cmd == "/quit" || cmd == "/exit") {
                rc = 0;  // asked for: an earlier failed command does not make the exit an error
                break;
            }
            if (cmd == "/reset") {
                chat.reset();
                std::fprintf(stderr, "(conversation reset)\n");
            } else if (cmd == "/stats") {
                std::fprintf(stderr, "conversation: %zu tokens, %zu messages\n", chat.conv.history.size(),
                             chat.conv.messages.size());
                if (h.print_stats) h.print_stats(ctx);
            } else if ((cmd == "/save" || cmd == "/load") && arg.empty()) {
                std::fprintf(stderr, "sluice chat: %s needs a file name\n", cmd.c_str());
                rc = 1;
            } else if (cmd == "/image") {
                int32_t w = 0, h2 = 0;
                if (arg.empty()) {
                    std::fprintf(stderr, "sluice chat: /image needs a file name\n");
                    rc = 1;
                } else if (!a.vision) {
                    std::fprintf(stderr, "sluice chat: /image needs the vision tower: start with --vision\n");
                    rc = 1;
                } else if ((int)chat.attached.size() >= SLUICE_MAX_IMAGES) {
                    std::fprintf(stderr, "sluice chat: (too many images)\n");
                    rc = 1;
                } else if (sluice_image_dimensions(arg.c_str(), &w, &h2) != SLUICE_OK) {
                    std::fprintf(stderr, "sluice chat: %s: not a readable image; nothing attached\n", arg.c_str());
                    rc = 1;
                } else {
                    chat.attached.push_back(arg);
                    std::fprintf(stderr, "(%s attached to the next message)\n", arg.c_str());
                }
            } else if (cmd == "/save") {
                if (!chat.save(arg)) rc = 1;
            } else if (cmd == "/load") {
                if (!chat.load(arg)) rc = 1;
            } else {
                std::fprintf(stderr, "sluice chat: unknown command %s (/reset, /stats, /save FILE, /load FILE, "
                                     "/quit; start a message with // to send a /)\n",
                             cmd.c_str());
            }
            continue;
        }
        if (line[0] == '/') line.erase(0, 1);  // "//text" sends "/text"
        if (!chat.turn(line)) rc = 1;
    }
    sigaction(SIGINT, &old_sa, nullptr);
    if (h.before_close) h.before_close(ctx);
    sluice_close(ctx);
    return rc;
}

}  // namespace sluice
