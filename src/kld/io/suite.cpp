#include "kld/io/suite.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sluice::kld {

namespace {

std::string dir_of(const std::string& p) {
    size_t s = p.rfind('/');
    return s == std::string::npos ? std::string(".") : p.substr(0, s);
}

// Parses a token file: JSON integer array (any whitespace), or, for
// suite-make inputs only, plain decimal ids separated by whitespace/commas.
Status parse_token_text(const std::string& text, const std::string& what, bool allow_plain,
                        std::vector<int32_t>* ids) {
    ids->clear();
    size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '[') {
        json j;
        SLUICE_TRY(parse_json(text, what, &j));
        if (!j.is_array()) return err(Code::format, what + ": not a JSON array");
        for (size_t i = 0; i < j.size(); ++i) {
            const json& v = j[i];
            if (!v.is_number_integer())
                return err(Code::format, what + ": element " + std::to_string(i) + " is not an integer");
            int64_t x = v.get<int64_t>();
            if (x < 0 || x > INT32_MAX)
                return err(Code::format, what + ": token id " + std::to_string(x) + " at " + std::to_string(i) +
                                             " is negative or too large");
            ids->push_back(int32_t(x));
        }
        return {};
    }
    if (!allow_plain) return err(Code::format, what + ": not a JSON integer array");
    size_t i = 0;
    while (i < text.size()) {
        char c = text[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ',') { ++i; continue; }
        if (c < '0' || c > '9') return err(Code::format, what + ": unexpected character at byte " + std::to_string(i));
        int64_t x = 0;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
            x = x * 10 + (text[i] - '0');
            if (x > INT32_MAX) return err(Code::format, what + ": token id too large");
            ++i;
        }
        ids->push_back(int32_t(x));
    }
    return {};
}

// Key/type check of the manifest (§1.7). Returns a format error naming the key.
Status need(const json& j, const char* key, json::value_t t, const std::string& where) {
    if (!j.contains(key)) return err(Code::format, where + ": missing key '" + key + "'");
    const json& v = j[key];
    bool ok = false;
    switch (t) {
        case json::value_t::number_integer: ok = v.is_number_integer(); break;
        case json::value_t::string: ok = v.is_string(); break;
        case json::value_t::boolean: ok = v.is_boolean(); break;
        case json::value_t::array: ok = v.is_array(); break;
        case json::value_t::object: ok = v.is_object(); break;
        default: ok = true;
    }
    if (!ok) return err(Code::format, where + ": key '" + key + "' has the wrong type");
    return {};
}

// Every manifest field that is a function of others (§1.7) must agree with
// them: a hand-edited or corrupted manifest whose token files still hash
// right would otherwise pass as a suite it is not.
Status check_derived_fields(const json& m, const std::string& P) {
    const int64_t T = m["context_length"].get<int64_t>(), n = int64_t(m["windows"].size());
    if (m["kind"] != "Kimi K3 KLD corpus suite") return err(Code::format, P + ": kind is " + m["kind"].dump());
    if (m["add_special_tokens"] != false) return err(Code::format, P + ": add_special_tokens must be false");
    if (m["scored_positions_per_window"] != T - 1)
        return err(Code::format, P + ": scored_positions_per_window is " + m["scored_positions_per_window"].dump() +
                                     ", context_length - 1 is " + std::to_string(T - 1));
    if (m["total_scored_positions"] != n * (T - 1))
        return err(Code::format, P + ": total_scored_positions is " + m["total_scored_positions"].dump() + ", " +
                                     std::to_string(n) + " windows x " + std::to_string(T - 1) + " is " +
                                     std::to_string(n * (T - 1)));
    std::map<std::string, int64_t> per_domain;
    for (const json& w : m["windows"])
        if (w.is_object() && w.contains("domain") && w["domain"].is_string()) per_domain[w["domain"]]++;
    for (const auto& [d, c] : m["domain_counts"].items())
        if (!c.is_number_integer() || per_domain[d] != c.get<int64_t>())
            return err(Code::format, P + ": domain_counts." + d + " is " + c.dump() + ", the windows hold " +
                                         std::to_string(per_domain[d]));
    for (const auto& [d, c] : per_domain)
        if (!m["domain_counts"].contains(d))
            return err(Code::format, P + ": domain '" + d + "' has windows but no domain_counts entry");
    std::set<std::string> ds;
    for (size_t i = 0; i < m["datasets"].size(); ++i) {
        const json& d = m["datasets"][i];
        const std::string D = P + ": datasets[" + std::to_string(i) + "]";
        if (!d.is_object()) return err(Code::format, D + ": not an object");
        const std::pair<const char*, json::value_t> dk[] = {{"domain", json::value_t::string},
                                                             {"window_starts", json::value_t::array},
                                                             {"windows", json::value_t::number_integer}};
        for (auto& [k, t] : dk) SLUICE_TRY(need(d, k, t, D));
        if (!ds.insert(d["domain"].get<std::string>()).second)
            return err(Code::format, D + ": domain " + d["domain"].dump() + " appears twice");
        if (int64_t(d["window_starts"].size()) != d["windows"].get<int64_t>() ||
            per_domain[d["domain"]] != d["windows"].get<int64_t>())
            return err(Code::format, D + ": windows " + d["windows"].dump() + " disagrees with window_starts or the windows");
    }
    if (ds.size() != per_domain.size()) return err(Code::format, P + ": datasets do not list every domain once");
    return {};
}

// One window record against the suite's other fields (§1.7).
Status check_window_record(const json& m, const json& w, size_t i, int T, const std::string& W) {
    if (w["index"] != int64_t(i)) return err(Code::format, W + ": index is " + w["index"].dump() + ", not in index order");
    if (w["num_tokens"] != T)
        return err(Code::format, W + ": num_tokens " + w["num_tokens"].dump() + " != context_length " + std::to_string(T));
    const int64_t st = w["source_token_start"].get<int64_t>(), en = w["source_token_end"].get<int64_t>();
    if (st < 0 || en - st != T)
        return err(Code::format, W + ": source_token_start/end [" + std::to_string(st) + ", " + std::to_string(en) +
                                     ") is not a window of " + std::to_string(T) + " tokens");
    const std::string tf = w["token_file"];
    if (tf.empty() || tf[0] == '/' || tf.find("..") != std::string::npos)
        return err(Code::format, W + ": token_file '" + tf + "' must be a relative path inside the suite");
    for (const json& d : m["datasets"]) {
        if (!d.is_object() || d.value("domain", json()) != w["domain"]) continue;
        const int64_t di = w["domain_index"].get<int64_t>();
        const json& starts = d["window_starts"];
        if (di < 0 || di >= int64_t(starts.size()) || starts[size_t(di)] != st)
            return err(Code::format, W + ": domain_index " + std::to_string(di) + " / source_token_start " +
                                         std::to_string(st) + " disagree with datasets window_starts");
        if (d.contains("dataset") && d["dataset"] != w["dataset"])
            return err(Code::format, W + ": dataset " + w["dataset"].dump() + " disagrees with its datasets entry");
        if (d.contains("revision") && d["revision"] != w["dataset_revision"])
            return err(Code::format, W + ": dataset_revision disagrees with its datasets entry");
        return {};
    }
    return err(Code::format, W + ": domain " + w["domain"].dump() + " has no datasets entry");
}

}  // namespace

std::string token_ids_hash(const std::vector<int32_t>& ids) { return sha256_hex(compact_int_array(ids)); }

std::string suite_token_hash(const std::vector<std::string>& hs) {
    std::string s;
    for (size_t i = 0; i < hs.size(); ++i) {
        if (i) s += '\n';
        s += hs[i];
    }
    return sha256_hex(s);
}

int Suite::position_of(int window_index) const {
    for (size_t i = 0; i < windows.size(); ++i)
        if (windows[i].index == window_index) return int(i);
    return -1;
}

Status load_suite(const std::string& path, const SuiteCheck& chk, Suite* out) {
    Suite s;
    s.manifest_path = path;
    if (!(path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0))
        s.manifest_path = join_path(path, "suite-manifest.json");
    s.dir = dir_of(s.manifest_path);
    std::string text;
    SLUICE_TRY(read_file(s.manifest_path, &text));
    s.manifest_sha256 = sha256_hex(text);
    SLUICE_TRY(parse_json(text, s.manifest_path, &s.manifest));
    const json& m = s.manifest;
    const std::string& P = s.manifest_path;
    using V = json::value_t;
    const std::pair<const char*, V> top[] = {
        {"format_version", V::number_integer}, {"kind", V::string}, {"context_length", V::number_integer},
        {"add_special_tokens", V::boolean}, {"selection", V::string}, {"window_count", V::number_integer},
        {"scored_positions_per_window", V::number_integer}, {"total_scored_positions", V::number_integer},
        {"domain_counts", V::object}, {"model_tokenizer", V::string}, {"tokenizer_class", V::string},
        {"suite_token_hash_sha256", V::string}, {"datasets", V::array}, {"windows", V::array}};
    if (!m.is_object()) return err(Code::format, P + ": not a JSON object");
    for (auto& [k, t] : top) SLUICE_TRY(need(m, k, t, P));
    if (m["format_version"] != 1) return err(Code::format, P + ": format_version is " + m["format_version"].dump() + ", not 1");
    if (m["context_length"].get<int64_t>() < 2 || m["context_length"].get<int64_t>() > (int64_t(1) << 24))
        return err(Code::format, P + ": context_length " + m["context_length"].dump() + " outside [2, 2^24]");
    s.context_length = m["context_length"].get<int>();
    const int T = s.context_length;
    SLUICE_TRY(check_derived_fields(m, P));
    const json& ws = m["windows"];
    if (int64_t(ws.size()) != m["window_count"].get<int64_t>())
        return err(Code::format, P + ": window_count " + m["window_count"].dump() + " but " +
                                     std::to_string(ws.size()) + " window records");
    std::vector<std::string> hashes;
    std::set<int> seen;
    for (size_t i = 0; i < ws.size(); ++i) {
        const json& w = ws[i];
        const std::string W = P + ": windows[" + std::to_string(i) + "]";
        if (!w.is_object()) return err(Code::format, W + ": not an object");
        const std::pair<const char*, V> wk[] = {
            {"index", V::number_integer}, {"domain", V::string}, {"domain_index", V::number_integer},
            {"dataset", V::string}, {"dataset_revision", V::string}, {"source_token_start", V::number_integer},
            {"source_token_end", V::number_integer}, {"num_tokens", V::number_integer}, {"token_file", V::string},
            {"token_ids_json_sha256", V::string}, {"token_ids_first16", V::array}, {"token_ids_last16", V::array}};
        for (auto& [k, t] : wk) SLUICE_TRY(need(w, k, t, W));
        SLUICE_TRY(check_window_record(m, w, i, T, W));
        SuiteWindow sw;
        sw.index = w["index"].get<int>();
        if (!seen.insert(sw.index).second) return err(Code::format, W + ": duplicate window index " + std::to_string(sw.index));
        sw.domain = w["domain"];
        sw.domain_index = w["domain_index"].get<int>();
        sw.dataset = w["dataset"];
        sw.dataset_revision = w["dataset_revision"];
        sw.source_token_start = w["source_token_start"].get<int64_t>();
        sw.source_token_end = w["source_token_end"].get<int64_t>();
        sw.num_tokens = w["num_tokens"].get<int>();
        sw.token_file = w["token_file"];
        sw.token_hash = w["token_ids_json_sha256"];
        if (sw.num_tokens != T)
            return err(Code::format, W + ": num_tokens " + std::to_string(sw.num_tokens) + " != context_length " + std::to_string(T));
        const std::string tf = join_path(s.dir, sw.token_file);
        std::string tt;
        SLUICE_TRY(read_file(tf, &tt));
        SLUICE_TRY(parse_token_text(tt, tf, false, &sw.tokens));
        if (int(sw.tokens.size()) != T)
            return err(Code::format, tf + ": holds " + std::to_string(sw.tokens.size()) + " ids, expected T = " + std::to_string(T));
        if (chk.vocab > 0)
            for (size_t r = 0; r < sw.tokens.size(); ++r)
                if (sw.tokens[r] >= chk.vocab)
                    return err(Code::identity, tf + ": token id " + std::to_string(sw.tokens[r]) + " at position " +
                                                   std::to_string(r) + " >= vocab " + std::to_string(chk.vocab));
        std::string h = token_ids_hash(sw.tokens);
        if (h != sw.token_hash)
            return err(Code::identity, tf + ": window " + std::to_string(sw.index) + " token_ids_json_sha256 expected " +
                                           sw.token_hash + ", found " + h);
        // After the hash: a tampered token file is an identity error (3);
        // first16/last16 that disagree with verified ids are a bad manifest (4).
        for (const char* k : {"token_ids_first16", "token_ids_last16"}) {
            const size_t n = std::min<size_t>(16, sw.tokens.size());
            const bool first = k[10] == 'f';
            std::vector<int32_t> want(first ? sw.tokens.begin() : sw.tokens.end() - long(n),
                                      first ? sw.tokens.begin() + long(n) : sw.tokens.end());
            if (w[k] != json(want))
                return err(Code::format, W + ": " + k + " does not match " + tf);
        }
        hashes.push_back(h);
        s.windows.push_back(std::move(sw));
    }
    s.suite_hash = suite_token_hash(hashes);
    const std::string rec = m["suite_token_hash_sha256"];
    if (rec != s.suite_hash)
        return err(Code::identity, P + ": suite_token_hash_sha256 expected " + rec + ", recomputed " + s.suite_hash);
    if (!chk.expect_suite_hash.empty() && chk.expect_suite_hash != s.suite_hash)
        return err(Code::identity, P + ": suite hash " + s.suite_hash + " != --expect-suite-hash " + chk.expect_suite_hash);
    *out = std::move(s);
    return {};
}

Status check_suite_vocab(const Suite& s, int64_t vocab) {
    for (const auto& w : s.windows)
        for (size_t r = 0; r < w.tokens.size(); ++r)
            if (w.tokens[r] >= vocab)
                return err(Code::identity, join_path(s.dir, w.token_file) + ": token id " + std::to_string(w.tokens[r]) +
                                               " at position " + std::to_string(r) + " >= vocab " + std::to_string(vocab));
    return {};
}

Status select_windows(const Suite& s, const WindowSel& sel, std::vector<int>* pos) {
    pos->clear();
    const int n = int(s.windows.size());
    int given = (!sel.list.empty()) + sel.quick + (sel.start != 0 || sel.stop != -1);
    if (given > 1) return err(Code::usage, "choose one of --windows, --quick, --start-window/--stop-window");
    if (!sel.list.empty()) {
        int maxidx = 0;
        for (const auto& w : s.windows) maxidx = std::max(maxidx, w.index + 1);
        std::vector<int> idx;
        SLUICE_TRY(parse_window_list(sel.list, maxidx, &idx));
        for (int i : idx) {
            int p = s.position_of(i);
            if (p < 0) return err(Code::usage, "--windows: no window " + std::to_string(i) + " in the suite");
            pos->push_back(p);
        }
        return {};
    }
    if (sel.quick) {
        // A stratified screen: the first quarter (rounded up) of every domain,
        // which is {0,1,2,3,16,17,24,25} on the festr2 32-window layout.
        std::map<std::string, int> count, taken;
        for (const auto& w : s.windows) count[w.domain]++;
        for (int p = 0; p < n; ++p) {
            const auto& d = s.windows[p].domain;
            if (taken[d] < (count[d] + 3) / 4) { taken[d]++; pos->push_back(p); }
        }
        return {};
    }
    // Python slice semantics, as festr2's --start-window/--stop-window.
    auto norm = [n](int v) { return v < 0 ? std::max(0, n + v) : std::min(v, n); };
    int a = norm(sel.start), b = sel.stop == -1 ? n : norm(sel.stop);
    for (int p = a; p < b; ++p) pos->push_back(p);
    if (pos->empty()) return err(Code::usage, "window selection is empty");
    return {};
}

Status window_starts(int64_t N, int64_t L, int C, std::vector<int64_t>* out) {
    out->clear();
    if (C < 1) return err(Code::usage, "window count must be >= 1");
    if (N < int64_t(C) * L)
        return err(Code::usage, "token stream of " + std::to_string(N) + " tokens is shorter than " + std::to_string(C) +
                                    " x " + std::to_string(L));
    if (C == 1) {
        out->push_back((N - L) / 2);
        return {};
    }
    for (int i = 0; i < C; ++i)  // float division then floor, as the festr2 tool
        out->push_back(int64_t(std::floor(double(int64_t(i) * (N - L)) / double(C - 1))));
    for (int i = 1; i < C; ++i)
        if ((*out)[i] - (*out)[i - 1] < L) return err(Code::usage, "window starts closer than the context length");
    return {};
}

Status parse_source_spec(const std::string& arg, bool is_tokens, SourceSpec* out) {
    size_t eq = arg.find('='), colon = arg.rfind(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq)
        return err(Code::usage, "source '" + arg + "': expected NAME=FILE:WINDOWS");
    out->domain = arg.substr(0, eq);
    out->path = arg.substr(eq + 1, colon - eq - 1);
    out->is_tokens = is_tokens;
    try {
        out->windows = std::stoi(arg.substr(colon + 1));
    } catch (...) {
        return err(Code::usage, "source '" + arg + "': bad window count");
    }
    if (out->domain.empty() || out->path.empty() || out->windows < 1)
        return err(Code::usage, "source '" + arg + "': expected NAME=FILE:WINDOWS with WINDOWS >= 1");
    return {};
}

namespace {

// "" when path is absent or an empty directory; else what it is.
std::string occupied(const std::string& path) {
    std::error_code ec;
    const auto st = std::filesystem::symlink_status(path, ec);
    if (ec || !std::filesystem::exists(st)) return "";
    if (!std::filesystem::is_directory(st)) return "exists and is not a directory";
    if (std::filesystem::directory_iterator(path, ec) != std::filesystem::directory_iterator()) return "is not empty";
    return "";
}

// Moves the finished staging directory to dst. An existing dst is swapped
// out in one renameat2(RENAME_EXCHANGE), so a reader sees the old suite or
// the new one, never a mix; the old one is then deleted.
Status publish_dir(const std::string& staging, const std::string& dst) {
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(dst, ec))) {
        if (::rename(staging.c_str(), dst.c_str()) != 0)
            return err(Code::io, dst + ": cannot rename the finished suite into place: " + std::strerror(errno));
        return {};
    }
    if (::syscall(SYS_renameat2, AT_FDCWD, staging.c_str(), AT_FDCWD, dst.c_str(), RENAME_EXCHANGE) != 0)
        return err(Code::io, dst + ": cannot exchange with the finished suite: " + std::strerror(errno));
    std::filesystem::remove_all(staging, ec);  // now holds the old suite
    return {};
}

}  // namespace

Status make_suite(const MakeOptions& opt, Suite* out) {
    std::string dst = opt.out_dir;
    while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
    if (const std::string why = occupied(dst); !why.empty() && !opt.force)
        return err(Code::usage, dst + " " + why + "; give --force to replace it");
    // Built in DST.partial and published only when complete: an interrupted
    // run leaves no directory that looks like a suite at DST, and the next
    // run starts the staging directory afresh.
    MakeOptions o = opt;
    o.out_dir = dst + ".partial";
    {
        std::error_code ec;
        std::filesystem::remove_all(o.out_dir, ec);
        if (ec) return err(Code::io, o.out_dir + ": cannot clear: " + ec.message());
    }
    const int T = o.context_length;
    if (T < 2) return err(Code::usage, "--context must be >= 2");
    if (o.sources.empty()) return err(Code::usage, "suite make needs at least one source");
    std::set<std::string> doms;
    for (const auto& s : o.sources)
        if (!doms.insert(s.domain).second) return err(Code::usage, "domain '" + s.domain + "' given twice");
    SLUICE_TRY(make_dirs(join_path(o.out_dir, "tokens")));
    remove_tmp_files(o.out_dir);
    remove_tmp_files(join_path(o.out_dir, "tokens"));
    json datasets = json::array(), windows = json::array(), counts = json::object();
    std::vector<std::string> hashes;
    int index = 0;
    for (const auto& src : o.sources) {
        std::string text;
        SLUICE_TRY(read_file(src.path, &text));
        std::vector<int32_t> stream;
        if (src.is_tokens) {
            SLUICE_TRY(parse_token_text(text, src.path, true, &stream));
        } else {
            if (!o.tokenize) return err(Code::usage, "source '" + src.domain + "' is text but no tokenizer was given");
            Status st = o.tokenize(text, &stream);
            if (!st.is_ok()) return err(code_of(st), src.path + ": tokenizer failed: " + st.message());
        }
        std::vector<int64_t> starts;
        Status st = window_starts(int64_t(stream.size()), T, src.windows, &starts);
        if (!st.is_ok()) return err(code_of(st), "source '" + src.domain + "' (" + src.path + "): " + st.message());
        const std::string src_sha = sha256_hex(text);
        const std::string name = std::string(src.is_tokens ? "local-tokens:" : "local-text:") +
                                 src.path.substr(src.path.rfind('/') == std::string::npos ? 0 : src.path.rfind('/') + 1);
        json d;
        d["domain"] = src.domain;
        d["dataset"] = name;
        d["config"] = nullptr;
        d["split"] = "local";
        d["revision"] = src_sha;
        d["dataset_fingerprint"] = src_sha;
        d["rows"] = 1;
        d["construction"] = src.is_tokens ? "token ids read from a local file, used as the stream unchanged"
                                          : "local UTF-8 text file, tokenized once as a whole, special tokens off, no BOS";
        d["source_utf8_sha256"] = src_sha;
        d["source_tokens"] = int64_t(stream.size());
        d["window_starts"] = starts;
        d["windows"] = src.windows;
        datasets.push_back(d);
        counts[src.domain] = src.windows;
        for (int di = 0; di < src.windows; ++di, ++index) {
            std::vector<int32_t> ids(stream.begin() + starts[di], stream.begin() + starts[di] + T);
            char fname[64];
            std::snprintf(fname, sizeof fname, "tokens/window-%03d-", index);
            const std::string rel = fname + src.domain + ".json";
            const std::string arr = compact_int_array(ids);
            SLUICE_TRY(write_file_atomic(join_path(o.out_dir, rel), arr + "\n"));
            const std::string h = sha256_hex(arr);
            hashes.push_back(h);
            json w;
            w["index"] = index;
            w["domain"] = src.domain;
            w["domain_index"] = di;
            w["dataset"] = name;
            w["dataset_revision"] = src_sha;
            w["source_token_start"] = starts[di];
            w["source_token_end"] = starts[di] + T;
            w["num_tokens"] = T;
            w["token_file"] = rel;
            w["token_ids_json_sha256"] = h;
            w["token_ids_first16"] = std::vector<int32_t>(ids.begin(), ids.begin() + std::min(T, 16));
            w["token_ids_last16"] = std::vector<int32_t>(ids.end() - std::min(T, 16), ids.end());
            windows.push_back(w);
        }
    }
    json m;
    m["format_version"] = 1;
    m["kind"] = "Kimi K3 KLD corpus suite";  // festr2's tools key on this string
    m["context_length"] = T;
    m["add_special_tokens"] = false;
    m["selection"] = "evenly spaced, non-overlapping windows over each domain's token stream: start_i = floor(i*(N-T)/(C-1))";
    m["window_count"] = index;
    m["scored_positions_per_window"] = T - 1;
    m["total_scored_positions"] = int64_t(index) * (T - 1);
    m["domain_counts"] = counts;
    m["model_tokenizer"] = o.model_tokenizer;
    m["tokenizer_class"] = o.tokenizer_class;
    m["suite_token_hash_sha256"] = suite_token_hash(hashes);
    m["datasets"] = datasets;
    m["windows"] = windows;
    SLUICE_TRY(write_file_atomic(join_path(o.out_dir, "suite-manifest.json"), dump_py(m, true)));
    SLUICE_TRY(load_suite(o.out_dir, SuiteCheck{}, out));
    SLUICE_TRY(publish_dir(o.out_dir, dst));
    return load_suite(dst, SuiteCheck{}, out);
}

}  // namespace sluice::kld
