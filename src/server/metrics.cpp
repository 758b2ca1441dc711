// Prometheus metrics (see metrics.h).
#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace sluice::server {

void Metrics::record(const std::string &endpoint, int status, int prompt_tokens, int completion_tokens,
                     int reasoning_tokens, double seconds, int cached_tokens) {
    std::lock_guard<std::mutex> lk(mu_);
    requests_[{endpoint, status}]++;
    prompt_tokens_ += (uint64_t)std::max(prompt_tokens, 0);
    cached_tokens_ += (uint64_t)std::max(cached_tokens, 0);
    completion_tokens_ += (uint64_t)std::max(completion_tokens, 0);
    reasoning_tokens_ += (uint64_t)std::max(reasoning_tokens, 0);
    seconds_sum_ += seconds;
    seconds_count_++;
}

void Metrics::engine(const EngineStats &e) {
    std::lock_guard<std::mutex> lk(mu_);
    engine_ = e;
    have_engine_ = true;
}

namespace {

void metric(std::string &o, const char *name, const char *type, const char *help) {
    o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string num(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", v);
    return b;
}

// Label values escape backslash, quote and newline.
std::string label(const std::string &v) {
    std::string o;
    for (char c : v) {
        if (c == '\\' || c == '"') o += '\\', o += c;
        else if (c == '\n') o += "\\n";
        else o += c;
    }
    return o;
}

}  // namespace

std::string Metrics::render(const SchedulerStats &q, const std::string &model) const {
    std::lock_guard<std::mutex> lk(mu_);
    std::string o;
    metric(o, "sluice_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (const auto &[k, n] : requests_)
        o += "sluice_requests_total{endpoint=\"" + label(k.first) + "\",status=\"" + std::to_string(k.second) +
             "\"} " + std::to_string(n) + "\n";
    metric(o, "sluice_prompt_tokens_total", "counter", "Prompt tokens evaluated for requests.");
    o += "sluice_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
    metric(o, "sluice_prompt_tokens_cached_total", "counter",
           "Prompt tokens the session held and did not evaluate again (cache_prompt); part of "
           "sluice_prompt_tokens_total.");
    o += "sluice_prompt_tokens_cached_total " + std::to_string(cached_tokens_) + "\n";
    metric(o, "sluice_completion_tokens_total", "counter", "Tokens generated (reasoning included).");
    o += "sluice_completion_tokens_total " + std::to_string(completion_tokens_) + "\n";
    metric(o, "sluice_reasoning_tokens_total", "counter", "Tokens generated in the think channel.");
    o += "sluice_reasoning_tokens_total " + std::to_string(reasoning_tokens_) + "\n";
    metric(o, "sluice_request_duration_seconds", "summary", "Wall time of answered generation requests.");
    o += "sluice_request_duration_seconds_sum " + num(seconds_sum_) + "\n";
    o += "sluice_request_duration_seconds_count " + std::to_string(seconds_count_) + "\n";
    metric(o, "sluice_queue_waiting", "gauge", "Requests waiting behind the running one.");
    o += "sluice_queue_waiting " + std::to_string(q.queued) + "\n";
    metric(o, "sluice_queue_running", "gauge", "Requests being generated (0 or 1).");
    o += "sluice_queue_running " + std::to_string(q.running) + "\n";
    metric(o, "sluice_queue_rejected_total", "counter", "Requests refused with 429 (queue full).");
    o += "sluice_queue_rejected_total " + std::to_string(q.rejected) + "\n";
    metric(o, "sluice_queue_cancelled_total", "counter", "Requests dropped or stopped because the client left.");
    o += "sluice_queue_cancelled_total " + std::to_string(q.cancelled) + "\n";
    if (have_engine_) {
        const EngineStats &e = engine_;
        const uint64_t acc = e.expert_cache_hits + e.expert_cache_misses;
        metric(o, "sluice_tokens_evaluated_total", "counter", "Positions the engine evaluated (prompts and outputs).");
        o += "sluice_tokens_evaluated_total " + std::to_string(e.tokens_evaluated) + "\n";
        metric(o, "sluice_prompt_tokens_reevaluated_total", "counter",
               "Positions evaluated again to rewind the KDA state from a checkpoint to a reused prefix's end.");
        o += "sluice_prompt_tokens_reevaluated_total " + std::to_string(e.rewind_tokens_reevaluated) + "\n";
        metric(o, "sluice_prompt_tokens_replayed_total", "counter",
               "Positions a rewind replayed from the KDA replay log instead (recurrences only, no trunk or experts).");
        o += "sluice_prompt_tokens_replayed_total " + std::to_string(e.rewind_tokens_replayed) + "\n";
        metric(o, "sluice_sessions_kept", "gauge",
               "Other conversations' sessions kept aside (serve --session-cache-bytes), and their bytes below.");
        o += "sluice_sessions_kept " + std::to_string(e.sessions.held) + "\n";
        metric(o, "sluice_sessions_kept_bytes", "gauge", "Bytes of the sessions kept aside.");
        o += "sluice_sessions_kept_bytes " + std::to_string(e.sessions.bytes) + "\n";
        metric(o, "sluice_sessions_resumed_total", "counter",
               "Prompts that went on from a conversation kept aside instead of the live session.");
        o += "sluice_sessions_resumed_total " + std::to_string(e.sessions.resumed) + "\n";
        metric(o, "sluice_sessions_dropped_total", "counter", "Kept sessions dropped for room, least recently used first.");
        o += "sluice_sessions_dropped_total " + std::to_string(e.sessions.dropped) + "\n";
        metric(o, "sluice_expert_cache_hits_total", "counter", "Routed-expert lookups served from the cache.");
        o += "sluice_expert_cache_hits_total " + std::to_string(e.expert_cache_hits) + "\n";
        metric(o, "sluice_expert_cache_misses_total", "counter", "Routed-expert lookups that read the disk.");
        o += "sluice_expert_cache_misses_total " + std::to_string(e.expert_cache_misses) + "\n";
        metric(o, "sluice_expert_cache_hit_ratio", "gauge", "Hits over lookups since start.");
        o += "sluice_expert_cache_hit_ratio " + num(acc ? (double)e.expert_cache_hits / (double)acc : 0.0) + "\n";
        metric(o, "sluice_expert_read_bytes_total", "counter", "Bytes of expert records read from disk.");
        o += "sluice_expert_read_bytes_total " + std::to_string(e.expert_bytes_read) + "\n";
        metric(o, "sluice_expert_reads_total", "counter", "Expert records read from disk.");
        o += "sluice_expert_reads_total " + std::to_string(e.expert_reads) + "\n";
        metric(o, "sluice_expert_read_bytes_per_second", "gauge",
               "Expert bytes read over the time spent reading (I/O threads summed).");
        o += "sluice_expert_read_bytes_per_second " +
             num(e.seconds_read > 0 ? (double)e.expert_bytes_read / e.seconds_read : 0.0) + "\n";
        metric(o, "sluice_eval_seconds_total", "counter", "Wall time inside the engine's eval.");
        o += "sluice_eval_seconds_total " + num(e.seconds_eval) + "\n";
    }
    metric(o, "sluice_model_info", "gauge", "The model served.");
    o += "sluice_model_info{model=\"" + label(model) + "\"} 1\n";
    return o;
}

}  // namespace sluice::server
