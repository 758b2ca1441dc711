// Pieces of the CLI shared by its subcommands.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace sluice {

// Collects sluice_set_trace callbacks and writes the trace directory that
// tools/oracle/diff.py reads: trace.json, one n_tokens x hidden f32 file per
// (layer, stage), and logits.f32.
class TraceWriter {
public:
    bool begin(const std::string &dir, int n_tokens, std::string *err);
    static void callback(void *user, int layer, const char *stage, int pos, const float *x, int hidden);
    bool finish(const std::vector<float> &logits, int vocab, const std::string &producer, std::string *err);

private:
    struct Entry {
        int layer;
        std::string stage;
        std::vector<float> data;
    };
    std::string dir_;
    int n_ = 0, hidden_ = 0, n_layers_ = 0;
    std::vector<Entry> entries_;
    std::map<std::pair<int, std::string>, size_t> index_;
};

}  // namespace sluice
