// What a container is: the summary `sluice info` shows and the fingerprint
// JSON that oracle fixtures record as their provenance (issue 3).
#pragma once
#include <cstdint>
#include <string>

#include "model/engine.h"

namespace sluice {

struct ModelSummary {
    std::string family, arch, trunk_formats, expert_format;
    int n_kda = 0, n_moe = 0;
    uint64_t total_params = 0, active_params = 0, trunk_bytes = 0, expert_bytes = 0;
};

ModelSummary summarize(const Engine &e);
// Empty string and *err set if a file cannot be hashed.
std::string fingerprint_json(const Engine &e, std::string *err);

}  // namespace sluice
