#include "common/checked_file.h"
#include "runtime/route_trace.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace sluice {
namespace {
constexpr size_t kMaxLine = 16u << 20;     // one token of a 1000-layer top-64 model is far below this
constexpr size_t kMaxTokens = 1u << 20;
constexpr size_t kMaxLayers = 4096;
constexpr size_t kMaxK = 1024;
constexpr int64_t kMaxExpert = 1 << 20;
}  // namespace

Status load_route_trace(const std::string &path, RouteTrace *out) {
    // Regular file only (a FIFO must not hang `sluice plan --trace`);
    // bounded at the most lines of the longest length allowed below.
    std::string text;
    if (Status rs = read_input_file(path, size_t{1} << 34, &text); !rs)
        return io_error("the routing trace: " + rs.message());
    std::istringstream f(text);
    RouteTrace tr;
    tr.path = path;
    std::string line;
    size_t lineno = 0;
    auto bad = [&](const std::string &why) { return format_error(path + ":" + std::to_string(lineno) + ": " + why); };
    while (std::getline(f, line)) {
        lineno++;
        if (line.size() > kMaxLine) return bad("line longer than 16 MiB");
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (tr.tokens.size() >= kMaxTokens) return bad("more than 2^20 tokens");
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
        auto L = j.find("layers");
        if (L == j.end() || !L->is_array()) return bad("\"layers\" missing or not an array");
        if (L->empty() || L->size() > kMaxLayers) return bad("\"layers\" must hold 1 to 4096 MoE layers");
        std::vector<std::vector<int>> tok;
        for (size_t m = 0; m < L->size(); m++) {
            const auto &ids = (*L)[m];
            if (!ids.is_array() || ids.empty() || ids.size() > kMaxK)
                return bad("layers[" + std::to_string(m) + "] must be an array of 1 to 1024 expert ids");
            std::vector<int> v;
            for (const auto &e : ids) {
                if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= kMaxExpert)
                    return bad("layers[" + std::to_string(m) + "] holds an id that is not an integer in [0, 2^20)");
                v.push_back((int)e.get<int64_t>());
                tr.max_expert = std::max(tr.max_expert, v.back());
            }
            tr.top_k = std::max(tr.top_k, (int)v.size());
            tok.push_back(std::move(v));
        }
        if (tr.tokens.empty()) tr.moe_layers = (int)tok.size();
        else if ((int)tok.size() != tr.moe_layers)
            return bad("has " + std::to_string(tok.size()) + " MoE layers, the first line has " +
                       std::to_string(tr.moe_layers));
        tr.tokens.push_back(std::move(tok));
    }
    if (tr.tokens.empty()) return format_error(path + ": the routing trace holds no tokens");
    *out = std::move(tr);
    return Status::ok();
}

std::string route_trace_line(int64_t tok, const std::vector<std::vector<int>> &layers) {
    std::ostringstream s;
    s << "{\"tok\": " << tok << ", \"layers\": [";
    for (size_t m = 0; m < layers.size(); m++) {
        s << (m ? ", [" : "[");
        for (size_t i = 0; i < layers[m].size(); i++) s << (i ? ", " : "") << layers[m][i];
        s << "]";
    }
    s << "]}";
    return s.str();
}

}  // namespace sluice
