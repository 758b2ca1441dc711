// HTTP routes, authentication, errors and streaming (see server.h).
#include "server/server.h"
#include "server/images.h"

#include <httplib.h>
#include <sys/socket.h>

#include "server/transport.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "server/conn_watch.h"
#include "server/format.h"
#include "server/request.h"
#include "server/web_page.h"

namespace sluice::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// How often a waiting HTTP thread looks at its client's socket.
constexpr auto kPoll = std::chrono::milliseconds(25);

ApiError make_error(int status, std::string type, std::string message, std::string code = {},
                    std::string param = {}) {
    ApiError e;
    e.status = status;
    e.type = std::move(type);
    e.message = std::move(message);
    e.code = std::move(code);
    e.param = std::move(param);
    return e;
}

void send_error(httplib::Response &res, const ApiError &e) {
    res.status = e.status;
    if (e.status == 429) res.set_header("Retry-After", "1");
    res.set_content(dump(error_json(e)), "application/json");
}

void send_json(httplib::Response &res, const json &j) {
    res.status = 200;
    res.set_content(dump(j), "application/json");
}

// Compares without an early exit, so the time taken does not reveal how
// much of a guessed key was right.
bool same_secret(const std::string &a, const std::string &b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); i++) diff |= (unsigned char)(a[i] ^ b[i % std::max<size_t>(b.size(), 1)]);
    return diff == 0 && !b.empty();
}

bool authorized(const ServerOptions &opt, const httplib::Request &req, ApiError *err) {
    if (opt.api_key.empty()) return true;
    const std::string h = req.get_header_value("Authorization");
    static const std::string kBearer = "Bearer ";
    if (h.empty()) {
        *err = make_error(401, "invalid_request_error",
                          "You didn't provide an API key: send it as 'Authorization: Bearer KEY'.", "invalid_api_key");
        return false;
    }
    if (h.compare(0, kBearer.size(), kBearer) != 0 || !same_secret(h.substr(kBearer.size()), opt.api_key)) {
        *err = make_error(401, "invalid_request_error", "Incorrect API key provided.", "invalid_api_key");
        return false;
    }
    return true;
}

json model_object(const std::string &name, int64_t created) {
    return json{{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "sluice"}};
}

// httplib 0.11 listens with a backlog of 5, compiled into Debian's library.
// Under a burst of new connections (8 clients, each reconnecting after a
// 429 or a closed keep-alive) the kernel then drops SYNs, and the client
// retries a second later: a 1 s latency spike for a request that is
// answered in milliseconds. listen() again on the bound socket raises the
// backlog (Linux updates it in place); svr_sock_ is protected, hence the
// subclass.
// (HttpServer::widen_backlog, server/transport.h.)

// Everything the streaming content provider needs after the handler returns.
struct StreamState {
    std::shared_ptr<Job> job;
    ResponseHead head;
    PromptInfo prompt;
    ConnWatch watch;
    size_t offset = 0;  // completion logprobs: text_offset of the next token
    Metrics *metrics = nullptr;
    bool log = false;
    Clock::time_point t0;
};

const char *endpoint_name(Endpoint k) {
    switch (k) {
    case Endpoint::chat: return "chat";
    case Endpoint::completion: return "completions";
    case Endpoint::tokenize: return "tokenize";
    case Endpoint::detokenize: return "detokenize";
    }
    return "?";
}

// A finished generation: metrics, the engine snapshot, and the --log line
// (latency, prompt and completion tokens, tokens/s).
void account(Metrics *m, bool log, Endpoint kind, const GenResult &g, Clock::time_point t0) {
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (m) {
        m->record(endpoint_name(kind), 200, g.prompt_tokens, g.completion_tokens, g.reasoning_tokens, secs,
                  g.cached_tokens);
        if (g.have_engine) m->engine(g.engine);
    }
    if (log)
        std::fprintf(stderr,
                     "sluice serve: %s 200 %.3f s, prompt %d tokens (%d cached), completion %d tokens%s, %.1f tok/s, "
                     "finish %s\n",
                     endpoint_name(kind), secs, g.prompt_tokens, g.cached_tokens, g.completion_tokens,
                     g.reasoning_tokens > 0 ? (" (" + std::to_string(g.reasoning_tokens) + " reasoning)").c_str() : "",
                     secs > 0 ? g.completion_tokens / secs : 0.0, g.finish_reason.c_str());
}

json chunk_logprobs(const GenRequest &r, const std::vector<TokenLogprob> &toks, size_t *offset) {
    if (!r.logprobs) return nullptr;
    if (r.kind == Endpoint::chat) return chat_logprobs_json(toks);
    return completion_logprobs_json(toks, r.top_logprobs > 0, *offset, offset);
}

// Writes one streamed response; false when the client is gone.
bool stream_events(StreamState &st, httplib::DataSink &sink) {
    const GenRequest &r = st.job->request();
    const bool chat = r.kind == Endpoint::chat;
    auto write = [&](json j) {
        if (r.include_usage && !j.contains("usage")) j["usage"] = nullptr;
        std::string s = sse(j);
        return sink.write(s.data(), s.size());
    };
    bool ok = true;
    if (chat) {
        ok = write(chat_chunk(st.head, json{{"role", "assistant"}, {"content", ""}}, nullptr, ""));
    } else if (r.echo) {
        json lp = chunk_logprobs(r, st.prompt.logprobs, &st.offset);
        ok = write(completion_chunk(st.head, st.prompt.text, lp, ""));
    }
    while (ok) {
        Event ev;
        bool got = st.job->next(&ev, kPoll);
        if (st.watch.closed_every(kPoll)) {
            ok = false;
            break;
        }
        if (!got) continue;
        if (ev.kind == Event::Kind::delta) {
            json lp = chunk_logprobs(r, ev.delta.tokens, &st.offset);
            ok = chat ? write(chat_chunk(st.head, chat_delta_json(ev.delta), lp, ""))
                      : write(completion_chunk(st.head, ev.delta.text, lp, ""));
        } else if (ev.kind == Event::Kind::done) {
            const GenResult &g = ev.result;
            // K3 tool calls: each call's arguments arrive whole, after generation.
            if (chat && g.message.contains("tool_calls")) {
                const auto &calls = g.message["tool_calls"];
                for (size_t i = 0; ok && i < calls.size(); i++) {
                    json tc = {{"index", i}, {"function", {{"arguments", utf8_sanitize(calls[i]["function"]["arguments"].get<std::string>())}}}};
                    if (calls[i].contains("error")) tc["error"] = calls[i]["error"];  // arguments that do not parse
                    ok = write(chat_chunk(st.head, json{{"tool_calls", json::array({tc})}}, nullptr, ""));
                }
            }
            json last = chat ? chat_chunk(st.head, json::object(), nullptr, g.finish_reason)
                             : completion_chunk(st.head, "", nullptr, g.finish_reason);
            // OpenAI sends usage only in the include_usage chunk; every
            // response here carries it, so the final chunk has it otherwise.
            if (!r.include_usage)
                last["usage"] = usage_json(g.prompt_tokens, g.completion_tokens, g.reasoning_tokens, g.cached_tokens);
            ok = ok && write(last);
            if (ok && r.include_usage)
                ok = write(usage_chunk(st.head, chat, g.prompt_tokens, g.cached_tokens, g.completion_tokens,
                                       g.reasoning_tokens));
            account(st.metrics, st.log, r.kind, g, st.t0);
            if (ok) ok = sink.write("data: [DONE]\n\n", 14);
            if (ok) sink.done();
            return ok;
        } else if (ev.kind == Event::Kind::error) {
            // Headers are sent: the error travels as an event, as OpenAI's does.
            std::string s = sse(error_json(ev.error));
            ok = sink.write(s.data(), s.size()) && sink.write("data: [DONE]\n\n", 14);
            if (ok) sink.done();
            return ok;
        }
    }
    st.job->cancel();
    return false;
}

}  // namespace

Server::Server(Model &model, ServerOptions opt) : model_(model), opt_(std::move(opt)) {
    sched_ = std::make_unique<Scheduler>(model_, opt_.max_queue);
    http_ = std::make_unique<HttpServer>();
    routes();
}

Server::~Server() { stop(); }

void Server::stop() {
    if (http_) http_->stop();
    if (sched_) sched_->stop();
}

bool Server::bind(std::string *err) {
    // Connections idle or mid-headers are bounded (transport.h); the pool
    // has room for all of them on top of the request threads, so they can
    // never take the thread a new request (/health) needs.
    TransportLimits lim;
    lim.header_timeout_s = lim.body_timeout_s = (double)opt_.read_timeout_s;
    lim.keep_alive_s = (double)opt_.keep_alive_s;
    static_cast<HttpServer &>(*http_).set_transport_limits(lim);
    const size_t threads =
        (opt_.http_threads > 0 ? (size_t)opt_.http_threads : opt_.max_queue + 16) + lim.max_idle;
    // Every waiting request holds an HTTP thread; with fewer threads than
    // queue slots the 429 for the next client would wait for a free thread.
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http_->set_payload_max_length(opt_.max_body);
    // Small writes (headers, then a short body or an SSE chunk) must not
    // wait for the client's delayed ACK (Nagle): that added ~40 ms to every
    // response, 429s included.
    http_->set_tcp_nodelay(true);
    http_->set_read_timeout(opt_.read_timeout_s, 0);
    http_->set_write_timeout(opt_.write_timeout_s, 0);
    http_->set_keep_alive_timeout(opt_.keep_alive_s);
    // httplib closes a keep-alive connection after 5 requests by default;
    // reconnecting costs more than the requests themselves here.
    http_->set_keep_alive_max_count(1000);
    // httplib's default socket options set SO_REUSEPORT, which lets a second
    // server bind the same port and take half its connections (one with no
    // --api-key then answers what the first would refuse). SO_REUSEADDR
    // alone only allows rebinding over TIME_WAIT; a live listener is refused.
    http_->set_socket_options([](socket_t sock) {
        int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    if (opt_.port == 0) {
        port_ = http_->bind_to_any_port(opt_.host);
        if (port_ <= 0) return *err = "cannot bind to " + opt_.host + " on any port", false;
    } else {
        if (!http_->bind_to_port(opt_.host, opt_.port))
            return *err = "cannot bind to " + opt_.host + ":" + std::to_string(opt_.port) +
                          " (in use, or not an address of this machine)",
                   false;
        port_ = opt_.port;
    }
    static_cast<HttpServer &>(*http_).widen_backlog(512);
    return true;
}

bool Server::run() { return http_->listen_after_bind(); }

void Server::routes() {
    httplib::Server &h = *http_;
    const int64_t started = (int64_t)std::time(nullptr);

    h.Get("/health", [this](const httplib::Request &, httplib::Response &res) {
        SchedulerStats s = sched_->stats();
        send_json(res, json{{"status", "ok"},
                            {"model", opt_.model_name},
                            {"queue", {{"waiting", s.queued}, {"running", s.running}, {"max", s.max_queue},
                                       {"peak_waiting", s.peak_queued}}},
                            {"requests", {{"accepted", s.accepted}, {"rejected", s.rejected},
                                          {"completed", s.completed}, {"failed", s.failed},
                                          {"cancelled", s.cancelled}, {"timed_out", s.timed_out}}}});
    });

    h.Get("/v1/models", [this, started](const httplib::Request &req, httplib::Response &res) {
        ApiError err;
        if (!authorized(opt_, req, &err)) return send_error(res, err);
        json data = json::array({model_object(opt_.model_name, started)});
        for (const std::string &a : opt_.aliases) data.push_back(model_object(a, started));
        send_json(res, json{{"object", "list"}, {"data", data}});
    });

    h.Get(R"(/v1/models/(.+))", [this, started](const httplib::Request &req, httplib::Response &res) {
        ApiError err;
        if (!authorized(opt_, req, &err)) return send_error(res, err);
        if (!serves(req.matches[1]))
            return send_error(res, make_error(404, "invalid_request_error",
                                              "The model '" + std::string(req.matches[1]) + "' does not exist",
                                              "model_not_found", "model"));
        send_json(res, model_object(req.matches[1], started));
    });

    auto generate_route = [this](Endpoint kind) {
        return [this, kind](const httplib::Request &req, httplib::Response &res) {
            ApiError err;
            if (!authorized(opt_, req, &err)) return send_error(res, err);
            GenRequest gr;
            const auto t0 = Clock::now();
            auto refuse = [&](const ApiError &e) {
                metrics_.record(endpoint_name(kind), e.status, 0, 0, 0,
                                std::chrono::duration<double>(Clock::now() - t0).count());
                if (opt_.log_requests)
                    std::fprintf(stderr, "sluice serve: %s %d %s\n", endpoint_name(kind), e.status, e.message.c_str());
                send_error(res, e);
            };
            if (!parse_request(kind, req.body, &gr, &err)) return refuse(err);
            // Image parts (issue 21) become decoded pictures here, before the
            // queue: a bad image is the client's 400, counted like any refusal.
            if (!resolve_images(&gr, opt_.allow_local_images, &err)) return refuse(err);
            if (!gr.model.empty() && !serves(gr.model))
                return refuse(make_error(404, "invalid_request_error",
                                         "The model '" + gr.model + "' does not exist; this server serves '" +
                                             opt_.model_name + "'",
                                         "model_not_found", "model"));
            gr.default_thinking = opt_.default_thinking;
            gr.default_thinking_budget = opt_.default_thinking_budget;
            if (kind == Endpoint::chat && !opt_.forced_outputs.empty())
            {
                const auto &fo = opt_.forced_outputs[forced_next_++ % opt_.forced_outputs.size()];
                gr.forced_output = fo.text;
                gr.forced_then_sample = fo.then_sample;
            }
            const auto deadline = opt_.request_timeout_s > 0
                                      ? Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                           std::chrono::duration<double>(opt_.request_timeout_s))
                                      : Clock::time_point::max();
            auto job = std::make_shared<Job>(std::move(gr), deadline);
            switch (sched_->submit(job)) {
            case Scheduler::Submit::full:
                return send_error(res, make_error(429, "rate_limit_exceeded",
                                                  "The server is busy: " + std::to_string(opt_.max_queue) +
                                                      " requests are already waiting. Retry later.",
                                                  "rate_limit_exceeded"));
            case Scheduler::Submit::stopping:
                return send_error(res, make_error(503, "server_error", "the server is shutting down"));
            case Scheduler::Submit::ok: break;
            }
            auto st = std::make_shared<StreamState>(StreamState{
                job,
                ResponseHead{random_id(kind == Endpoint::chat ? "chatcmpl-" : "cmpl-"), (int64_t)std::time(nullptr),
                             opt_.model_name},
                {},
                ConnWatch(req.local_addr, req.local_port, req.remote_addr, req.remote_port),
                0,
                &metrics_,
                opt_.log_requests,
                t0});
            // Wait for the turn: the prompt event (accepted) or an error.
            Event ev;
            while (!job->next(&ev, kPoll)) {
                if (st->watch.closed()) {
                    job->cancel();  // nobody is left to answer
                    return;
                }
                // The worker fails a job that expires in the queue; this is
                // for one whose prompt is still being evaluated.
                if (deadline != Clock::time_point::max() && Clock::now() >= deadline + std::chrono::seconds(1)) {
                    job->cancel();
                    return send_error(res, make_error(503, "server_error",
                                                      "the request waited past the server's time limit", "timeout"));
                }
            }
            if (ev.kind == Event::Kind::error) return refuse(ev.error);
            st->prompt = std::move(ev.prompt);
            const GenRequest &r = job->request();

            if (r.stream) {
                res.set_header("Cache-Control", "no-cache");
                res.set_chunked_content_provider(
                    "text/event-stream", [st](size_t, httplib::DataSink &sink) { return stream_events(*st, sink); },
                    [st](bool success) {
                        if (!success) st->job->cancel();
                    });
                return;
            }
            // Not streamed: collect, watching the client (one text per choice).
            const size_t n = (size_t)std::max(r.n, 1);
            std::vector<std::string> texts(n, r.echo ? st->prompt.text : std::string());
            std::vector<std::vector<TokenLogprob>> toks(n, r.echo ? st->prompt.logprobs : std::vector<TokenLogprob>{});
            for (;;) {
                bool got = job->next(&ev, kPoll);
                if (st->watch.closed_every(kPoll)) {
                    job->cancel();
                    return;
                }
                if (!got) continue;
                if (ev.kind == Event::Kind::delta) {
                    const size_t c = std::min((size_t)std::max(ev.delta.choice, 0), n - 1);
                    texts[c] += ev.delta.text;
                    for (auto &t : ev.delta.tokens) toks[c].push_back(std::move(t));
                } else if (ev.kind == Event::Kind::error) {
                    return refuse(ev.error);
                } else if (ev.kind == Event::Kind::done) {
                    break;
                }
            }
            account(&metrics_, opt_.log_requests, r.kind, ev.result, t0);
            const GenResult &g = ev.result;
            json out;
            if (r.kind == Endpoint::chat) {
                out = chat_response(st->head, texts[0], r.logprobs ? &toks[0] : nullptr, g);
                if (!g.choices.empty()) {
                    out["choices"] = json::array();
                    for (size_t i = 0; i < g.choices.size() && i < n; i++)
                        out["choices"].push_back(chat_choice((int)i, texts[i], r.logprobs ? &toks[i] : nullptr, g.choices[i]));
                }
            } else {
                auto lp = [&](size_t i) {
                    return r.logprobs ? completion_logprobs_json(toks[i], r.top_logprobs > 0, 0, nullptr) : json(nullptr);
                };
                out = completion_response(st->head, texts[0], lp(0), g);
                if (!g.choices.empty()) {
                    out["choices"] = json::array();
                    for (size_t i = 0; i < g.choices.size() && i < n; i++)
                        out["choices"].push_back(completion_choice((int)i, texts[i], lp(i), g.choices[i]));
                }
            }
            send_json(res, out);
        };
    };

    h.Post("/v1/chat/completions", generate_route(Endpoint::chat));
    h.Post("/v1/completions", generate_route(Endpoint::completion));
    // llama-server's aliases of the same routes.
    h.Post("/chat/completions", generate_route(Endpoint::chat));
    h.Post("/completions", generate_route(Endpoint::completion));

    // /tokenize and /detokenize run on the worker (it owns the model), as a
    // job in the same queue.
    auto token_route = [this](Endpoint kind) {
        return [this, kind](const httplib::Request &req, httplib::Response &res) {
            ApiError err;
            if (!authorized(opt_, req, &err)) return send_error(res, err);
            GenRequest gr;
            if (!parse_request(kind, req.body, &gr, &err)) return send_error(res, err);
            auto job = std::make_shared<Job>(std::move(gr));
            if (sched_->submit(job) != Scheduler::Submit::ok)
                return send_error(res, make_error(429, "rate_limit_exceeded", "The server is busy. Retry later.",
                                                  "rate_limit_exceeded"));
            Event ev;
            while (!job->next(&ev, kPoll)) {
            }
            if (ev.kind == Event::Kind::error) return send_error(res, ev.error);
            const GenResult &g = ev.result;
            if (kind == Endpoint::detokenize) return send_json(res, json{{"content", utf8_sanitize(g.text)}});
            json toks = json::array();
            for (size_t i = 0; i < g.tokens.size(); i++) {
                if (job->request().with_pieces) toks.push_back(json{{"id", g.tokens[i]}, {"piece", utf8_sanitize(g.pieces[i])}});
                else toks.push_back(g.tokens[i]);
            }
            send_json(res, json{{"tokens", toks}});
        };
    };
    h.Post("/tokenize", token_route(Endpoint::tokenize));
    h.Post("/detokenize", token_route(Endpoint::detokenize));

    h.Get("/metrics", [this](const httplib::Request &req, httplib::Response &res) {
        ApiError err;
        if (!authorized(opt_, req, &err)) return send_error(res, err);
        res.status = 200;
        res.set_content(metrics_.render(sched_->stats(), opt_.model_name), "text/plain; version=0.0.4");
    });

    // The chat page: one self-contained file, no external requests.
    h.Get("/", [](const httplib::Request &, httplib::Response &res) {
        res.status = 200;
        res.set_header("Content-Security-Policy",
                       "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'");
        res.set_content(web_page_html(), "text/html; charset=utf-8");
    });

    // httplib answers unknown routes (404) and oversized bodies (413) itself
    // with an empty body; give those an OpenAI error object too.
    h.set_error_handler([](const httplib::Request &req, httplib::Response &res) {
        if (!res.body.empty()) return;
        ApiError e;
        e.status = res.status;
        if (res.status == 404) e.message = "Unknown request URL: " + req.method + " " + req.path;
        else if (res.status == 413) e.message = "The request body is larger than the server accepts";
        else if (res.status == 400) e.message = "Malformed HTTP request";
        else e.message = "HTTP error " + std::to_string(res.status);
        if (res.status >= 500) e.type = "server_error";
        send_error(res, e);
    });
    if (opt_.log_requests)
        h.set_logger([](const httplib::Request &req, const httplib::Response &res) {
            std::fprintf(stderr, "sluice serve: %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
        });
    h.set_exception_handler([](const httplib::Request &, httplib::Response &res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception &ex) {
            what += std::string(": ") + ex.what();
        } catch (...) {
        }
        send_error(res, make_error(500, "server_error", what));
    });
}

}  // namespace sluice::server
