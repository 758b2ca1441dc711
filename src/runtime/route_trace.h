// Expert routing traces: one JSON object a line, {"tok": t, "layers":
// [[expert ids] per MoE layer]} (the layout of ../shared/traces). Read for
// cache-policy replays and the benchmark-only route replay; untrusted
// input, so every count and id is bounded and errors name file and line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace sluice {

struct RouteTrace {
    // tokens[t][m] = expert ids of MoE layer ordinal m at token t, router order.
    std::vector<std::vector<std::vector<int>>> tokens;
    int moe_layers = 0;  // the same for every token
    int top_k = 0;       // the largest list length
    int max_expert = -1;
    std::string path;
};

Status load_route_trace(const std::string &path, RouteTrace *out);
// One line of the format, without the newline.
std::string route_trace_line(int64_t tok, const std::vector<std::vector<int>> &layers);

}  // namespace sluice
