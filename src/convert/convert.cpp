// Orchestration of `sluice convert`: plan, resume state, layers, trunk,
// codebooks, side files, and manifest.json last as the commit point.
#include "common/checked_file.h"
#include "convert/convert.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "format/file_sha256.h"
#include "convert/checkpoint.h"
#include "convert/experts.h"
#include "convert/hfconfig.h"
#include "convert/numeric.h"
#include "convert/sidefiles.h"
#include "convert/trunk.h"
#include "convert/util.h"
#include "format/manifest.h"

namespace sluice::convert {

namespace fs = std::filesystem;

const char* converter_version() { return "0.1.0"; }

static const char* kStateFile = ".sluice-convert";  // fingerprint of the run in progress

static std::string check_options(const ConvertOptions& o) {
    if (o.source_dir.empty() || o.output_dir.empty()) return "source and output directories are required";
    if (o.trunk_bits != 3 && o.trunk_bits != 4 && o.trunk_bits != 8) return "--trunk-bits must be 3, 4 or 8";
    if (o.stages != 2 && o.stages != 3 && o.stages != 4 && o.stages != 6) return "--stages must be 2, 3, 4 or 6";
    if (o.entries != 16 && o.entries != 32 && o.entries != 64 && o.entries != 128 && o.entries != 256)
        return "--entries must be 16, 32, 64, 128 or 256";
    if (o.index_bits != 8 && o.index_bits != 6) return "--index-bits must be 8 or 6";
    if (o.index_bits == 6 && (o.stages != 4 || o.entries != 64))
        return "--index-bits 6 (VQ4P) requires --stages 4 --entries 64";
    if (o.cb_sample < 1) return "--cb-sample must be >= 1";
    if (o.kmeans_iters < 0 || o.kmeans_iters > 1000) return "--kmeans-iters must be in [0, 1000]";
    if (o.train_vectors < o.entries) return "--train-vectors must be >= --entries";
    return "";
}

// Plain ASCII without quotes or backslashes: warp scans manifest strings raw.
static std::string ascii_safe(const std::string& s) {
    std::string o;
    for (unsigned char c : s) o += (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') ? static_cast<char>(c) : '_';
    return o;
}

static bool hf_source(const ConvertOptions& o, const Checkpoint& ck, ojson* out, std::string* err);

static bool build_provenance(const ConvertOptions& o, const Checkpoint& ck, ojson* prov, std::string* err) {
    ojson set;
    set["trunk_bits"] = o.trunk_bits;
    set["trunk8"] = o.trunk8;
    set["stages"] = o.stages;
    set["entries"] = o.entries;
    set["index_bits"] = o.index_bits;
    set["vec_dim"] = kVecDim;
    set["index_block"] = kIndexBlock;
    set["trunk_group"] = 128;
    set["cb_sample"] = o.cb_sample;
    set["kmeans_iters"] = o.kmeans_iters;
    set["kmeans_init"] = "kmeans++";
    set["train_vectors"] = o.train_vectors;
    set["seed"] = o.seed;
    ojson src;
    if (const GgufSource* g = ck.gguf()) {
        // A GGUF source: the file recorded as a shard is (name, size, header
        // SHA-256, type mix), plus its architecture; the config is the one
        // synthesized from its metadata, hashed as it goes into the manifest.
        src["format"] = "gguf";
        src["gguf_architecture"] = ascii_safe(g->arch());
        src["config_sha256"] = sha256_hex(g->config().dump());
        src["index_file"] = "";
        ojson s;
        s["file"] = ascii_safe(fs::path(g->path()).filename().string());
        s["bytes"] = g->file_size();
        s["header_sha256"] = g->header_sha256();
        ojson mix = ojson::object();
        for (const auto& [t, m] : g->type_mix()) {
            mix[ascii_safe(t)]["tensors"] = m.tensors;
            mix[ascii_safe(t)]["bytes"] = m.bytes;
        }
        s["dtypes"] = mix;
        src["shards"] = ojson::array({s});
    } else if (!hf_source(o, ck, &src, err)) {
        return false;
    }
    ojson p;
    p["converter"] = "sluice convert";
    p["version"] = converter_version();
    p["settings"] = set;
    p["source"] = src;
    p["fingerprint"] = sha256_hex(p.dump());
    *prov = p;
    return true;
}

// The source record of a Hugging Face checkpoint directory.
static bool hf_source(const ConvertOptions& o, const Checkpoint& ck, ojson* out, std::string* err) {
    ojson& src = *out;
    const std::string cfg = sha256_file(o.source_dir + "/config.json", err);
    if (cfg.empty()) return false;
    src["config_sha256"] = cfg;
    src["index_file"] = ck.index_file();
    if (!ck.index_file().empty()) {
        const std::string ih = sha256_file(o.source_dir + "/" + ck.index_file(), err);
        if (ih.empty()) return false;
        src["index_sha256"] = ih;
    }
    ojson shards = ojson::array();
    for (const ShardInfo& sh : ck.shards()) {
        ojson s;
        s["file"] = ascii_safe(sh.file);
        s["bytes"] = sh.size;
        s["header_sha256"] = sh.header_sha256;
        ojson mix = ojson::object();
        for (const auto& [dt, n] : sh.dtype_tensors) {
            mix[ascii_safe(dt)]["tensors"] = n;
            mix[ascii_safe(dt)]["bytes"] = sh.dtype_bytes.at(dt);
        }
        s["dtypes"] = mix;
        shards.push_back(s);
    }
    src["shards"] = shards;
    return true;
}

// Removes every file this converter writes (manifest first, so the directory
// never looks complete while it is being emptied).
static bool clear_output(const std::string& dir, std::string* err) {
    std::error_code ec;
    fs::remove(fs::path(dir) / "manifest.json", ec);
    for (const auto& de : fs::directory_iterator(dir, ec)) {
        const std::string n = de.path().filename().string();
        const bool ours = n == "trunk.bin" || n == "codebooks.bin" || n == "tokenizer.model" || n == "specials.json" ||
                          n == "chat.json" || n == "chat_template.jinja" || n == "vision.json" || n == kStateFile ||
                          n.rfind("experts-L", 0) == 0 || n.rfind("codebooks-L", 0) == 0 ||
                          (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0);
        if (ours) fs::remove(de.path(), ec);
        if (ec) {
            *err = de.path().string() + ": cannot remove: " + ec.message();
            return false;
        }
    }
    return true;
}

// Decides between fresh start, resume and "already complete".
// Returns 0 to proceed, 1 if already complete, -1 on error.
static int prepare_output(const ConvertOptions& o, const std::string& fp, ProgressSink* sink, std::string* err) {
    const std::string& dir = o.output_dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) {
        *err = dir + ": cannot create output directory";
        return -1;
    }
    std::string s;
    if (o.force) return clear_output(dir, err) && write_file_atomic(dir + "/" + kStateFile, fp, err) ? 0 : -1;
    if (file_exists(dir + "/manifest.json")) {
        // Read as the engine reads it (format/manifest.h): a container that
        // would not load is never taken for a finished one.
        std::string m;
        Manifest man;
        if (read_file(dir + "/manifest.json", &m, err) &&
            parse_manifest(m, dir + "/manifest.json", &man).is_ok() && !man.provenance_json.empty()) {
            try {
                if (ojson::parse(man.provenance_json).value("fingerprint", "") == fp) return 1;
            } catch (const std::exception&) {
            }
        }
        *err = dir + ": holds a finished container from other settings or another source (use --force to overwrite)";
        return -1;
    }
    if (file_exists(dir + "/" + kStateFile) && read_file(dir + "/" + kStateFile, &s, err) && s == fp) {
        if (sink) sink->message("resuming the conversion in " + dir);
        return 0;
    }
    // A kill between the state file's temporary and its rename leaves only
    // that temporary: it is ours, so the directory still counts as empty
    // (otherwise the rerun refuses a directory the converter itself left).
    const std::string state_tmp = std::string(kStateFile) + ".tmp";
    bool empty = true;
    for (const auto& de : fs::directory_iterator(dir, ec))
        if (de.path().filename().string() != state_tmp || !de.is_regular_file(ec)) {
            empty = false;
            break;
        }
    if (!empty) {
        *err = dir + ": not empty and not an unfinished conversion with these settings (use --force)";
        return -1;
    }
    return clear_output(dir, err) && write_file_atomic(dir + "/" + kStateFile, fp, err) ? 0 : -1;
}

int run_convert(const ConvertOptions& opt, std::string* err, ProgressSink* user_sink) {
    DefaultSink dflt(opt.quiet);
    ProgressSink* sink = user_sink ? user_sink : &dflt;
    std::string e = check_options(opt);
    if (!e.empty()) {
        *err = e;
        return 1;
    }
    const int jobs = resolve_jobs(opt.jobs);
    {
        // --force clears the output of our file names: never let that be the source.
        // Nor anything inside it (compared by device and inode: links and
        // ".." do not hide it).
        if (std::string why = sluice::output_inside_reason(opt.output_dir, opt.source_dir, "the source checkpoint");
            !why.empty()) {
            *err = "output directory " + why;
            return 1;
        }
    }
    Checkpoint ck;
    ModelPlan mp;
    if (!open_source(opt.source_dir, &ck, &mp, err)) return 2;
    if (ck.gguf())
        for (const std::string& n : ck.gguf()->notes()) sink->message("note: " + n);
    std::vector<TrunkEntry> trunk;
    uint64_t trunk_total = 0;
    if (!plan_trunk(ck, mp, opt.trunk_bits, opt.trunk8, &trunk, &trunk_total, err)) return 2;
    ExpertParams ep;
    ep.S = opt.stages; ep.E = opt.entries; ep.index_bits = opt.index_bits;
    ep.cb_sample = opt.cb_sample; ep.iters = opt.kmeans_iters; ep.train = opt.train_vectors; ep.seed = opt.seed;
    const int64_t last_base = static_cast<int64_t>(mp.moe_layers.size()) * 3 * ep.S;
    if (last_base > 65535) {
        *err = "too many codebooks for the u16 codebook_id (" + std::to_string(last_base) + ")";
        return 1;
    }
    ojson prov;
    if (!build_provenance(opt, ck, &prov, err)) return 2;
    const std::string fp = prov["fingerprint"].get<std::string>();
    const std::string& dir = opt.output_dir;
    const int st = prepare_output(opt, fp, sink, err);
    if (st < 0) return 2;
    if (st == 1) {
        // A kill between the manifest commit and this cleanup leaves parts behind.
        for (int L : mp.moe_layers) ::unlink((dir + "/" + codebook_part(L)).c_str());
        ::unlink((dir + "/" + kStateFile).c_str());
        sink->message(dir + ": already complete for these settings; nothing to do");
        return 0;
    }

    // Experts, one layer at a time (workers share a layer, so memory is one
    // layer's sample plus one expert per worker whatever --jobs is).
    const RecordGeom g = record_geometry(mp.moe_inter, mp.lat, ep.S, ep.index_bits);
    const auto t_start = std::chrono::steady_clock::now();
    PhaseTimes pt;
    for (size_t i = 0; i < mp.moe_layers.size(); ++i) {
        const int L = mp.moe_layers[i];
        if (layer_done(dir, mp, ep, L)) {
            sink->message("layer " + std::to_string(L) + ": already converted, skipped");
            continue;
        }
        if (!convert_layer(ck, mp, ep, L, static_cast<int>(i) * 3 * ep.S, dir, jobs, sink, err, &pt)) return 2;
    }
    const auto t_trunk = std::chrono::steady_clock::now();
    if (file_size(dir + "/trunk.bin") == static_cast<int64_t>(trunk_total)) {
        sink->message("trunk.bin: already written, skipped");
    } else if (!write_trunk(ck, trunk, trunk_total, dir, jobs, sink, err)) {
        return 2;
    }
    const std::chrono::duration<double> trunk_s = std::chrono::steady_clock::now() - t_trunk;
    // codebooks.bin: the parts at their bases (3*S apart, from 0, no gaps).
    std::string cb, part;
    for (int L : mp.moe_layers) {
        if (!read_file(dir + "/" + codebook_part(L), &part, err)) return 2;
        cb += part;
    }
    if (!write_file_atomic(dir + "/codebooks.bin", cb, err)) return 2;
    std::vector<std::string> side;
    if (!ck.gguf() && !write_side_files(opt.source_dir, dir, mp, sink, &side, err)) return 2;
    // A GGUF carries its tokenizer in its metadata: the rank file, the
    // specials and the chat template come from there (when sluice runs it).
    if (ck.gguf() && !write_gguf_side_files(*ck.gguf(), dir, mp, sink, &side, err)) return 2;

    ojson m;
    m["format_version"] = 0;
    m["arch"] = ascii_safe(mp.arch);
    m["tensor_prefix"] = mp.tensor_prefix;
    m["config"] = mp.config;
    ojson eq;
    eq["fmt"] = ep.index_bits == 6 ? "VQ4P" : ep.S == 2 ? "VQ2R" : "VQ3R";
    eq["stages"] = ep.S;
    eq["vec_dim"] = kVecDim;
    eq["entries"] = ep.E;
    eq["index_block"] = kIndexBlock;
    eq["index_bits"] = ep.index_bits;
    eq["bits_per_weight"] = static_cast<double>(ep.S * ep.index_bits) / kVecDim;
    m["expert_quant"] = eq;
    ojson layers = ojson::object();
    for (size_t i = 0; i < mp.moe_layers.size(); ++i) {
        ojson l;
        l["file"] = bank_file(mp.moe_layers[i]);
        l["experts"] = mp.num_experts;
        l["bytes"] = static_cast<uint64_t>(mp.num_experts) * g.stride;
        l["codebook_base"] = static_cast<int64_t>(i) * 3 * ep.S;
        layers[std::to_string(mp.moe_layers[i])] = l;
    }
    m["layers"] = layers;
    ojson tr = ojson::array();
    for (const TrunkEntry& t : trunk) {
        ojson j;
        j["name"] = t.name;
        j["fmt"] = t.fmt;
        j["off"] = t.off;
        j["shape"] = t.shape;
        if (t.fmt != kF32) {
            j["group"] = 128;
            j["scale_off"] = t.scale_off;
        }
        j["bytes"] = t.bytes;
        tr.push_back(j);
    }
    m["trunk"] = tr;
    m["provenance"] = prov;
    {
        // Whole-file checksums of what no per-record crc covers; checked by
        // `sluice verify` and by --verify at open. A top-level key warp ignores.
        std::string th, ch;
        if (!status_ok(sluice::sha256_file(dir + "/trunk.bin", &th), err) ||
            !status_ok(sluice::sha256_file(dir + "/codebooks.bin", &ch), err))
            return 2;
        m["integrity"] = {{"trunk_sha256", th}, {"codebooks_sha256", ch}};
    }
    // Non-ASCII in the copied config is escaped (valid JSON); warp reads only
    // numbers and known ASCII keys from it.
    if (!write_file_atomic(dir + "/manifest.json", m.dump(1, ' ', true), err)) return 2;
    sink->progress("manifest", 1, 1, "manifest.json");
    // Committed: the transient parts and the state file can go.
    for (int L : mp.moe_layers) ::unlink((dir + "/" + codebook_part(L)).c_str());
    ::unlink((dir + "/" + kStateFile).c_str());
    const int64_t rss = peak_rss_kib();
    const std::chrono::duration<double> total_s = std::chrono::steady_clock::now() - t_start;
    char line[384];
    std::snprintf(line, sizeof line,
                  "converted %zu MoE layers, %zu trunk tensors (%llu bytes) in %.1f s (k-means %.1f s, expert "
                  "encoding %.1f s, trunk %.1f s); peak RSS %.1f MiB",
                  mp.moe_layers.size(), trunk.size(), static_cast<unsigned long long>(trunk_total), total_s.count(),
                  pt.kmeans_s, pt.encode_s, trunk_s.count(), rss < 0 ? -1.0 : static_cast<double>(rss) / 1024.0);
    sink->message(line);
    return 0;
}

}  // namespace sluice::convert
