// GET /metrics: Prometheus text exposition of the server's counters
// (requests by endpoint and status, tokens, request latency, the queue)
// and the engine's (expert cache hit rate, expert reads). Thread-safe: HTTP
// threads record finished requests; the engine counters are the snapshot
// the worker took at the end of the last request.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "server/model.h"
#include "server/scheduler.h"

namespace sluice::server {

class Metrics {
public:
    void record(const std::string &endpoint, int status, int prompt_tokens, int completion_tokens,
                int reasoning_tokens, double seconds, int cached_tokens = 0);
    void engine(const EngineStats &e);
    std::string render(const SchedulerStats &q, const std::string &model) const;

private:
    mutable std::mutex mu_;
    std::map<std::pair<std::string, int>, uint64_t> requests_;
    uint64_t prompt_tokens_ = 0, completion_tokens_ = 0, reasoning_tokens_ = 0, cached_tokens_ = 0;
    double seconds_sum_ = 0;
    uint64_t seconds_count_ = 0;
    bool have_engine_ = false;
    EngineStats engine_;
};

}  // namespace sluice::server
