// Damaged containers: each case must give a named error from sluice_open or
// sluice_eval, never a crash. CI runs this suite under ASan and UBSan.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sys/stat.h>
#include <unistd.h>

#include "format/file_sha256.h"
#include "format/io_fault.h"
#include "fixtures_util.h"
#include "sluice/sluice.h"

using namespace sluice_test;
namespace fs = std::filesystem;

namespace {

class BadInput : public ::testing::Test {
protected:
    void SetUp() override {
        if (!have_fixtures()) GTEST_SKIP() << "no fixtures at " << warp_dir();
        dir_ = fs::temp_directory_path() / ("sluice-bad-" + std::to_string(::getpid()) + "-" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override {
        if (!dir_.empty()) fs::remove_all(dir_);
    }
    // Copies a fixture container with writable permissions.
    std::string copy(const std::string &name) {
        fs::path dst = dir_ / (name + ".waste");
        fs::create_directories(dst);
        for (auto &e : fs::directory_iterator(container_path(name))) {
            fs::copy_file(e.path(), dst / e.path().filename());
            fs::permissions(dst / e.path().filename(), fs::perms::owner_read | fs::perms::owner_write);
        }
        return dst.string();
    }
    // The manifest's integrity record, as `sluice convert` writes it, for
    // the container's own trunk.bin and codebooks.bin.
    static void add_integrity(const std::string &c) {
        std::string th, ch;
        ASSERT_TRUE(sluice::sha256_file(c + "/trunk.bin", &th));
        ASSERT_TRUE(sluice::sha256_file(c + "/codebooks.bin", &ch));
        edit_manifest(c, [&](nlohmann::json &j) { j["integrity"] = {{"trunk_sha256", th}, {"codebooks_sha256", ch}}; });
    }
    static void edit_manifest(const std::string &c, const std::function<void(nlohmann::json &)> &fn) {
        std::ifstream in(c + "/manifest.json");
        nlohmann::json j = nlohmann::json::parse(in);
        in.close();
        fn(j);
        std::ofstream(c + "/manifest.json") << j.dump();
    }
    static void patch(const std::string &file, uint64_t off, const std::vector<uint8_t> &bytes) {
        std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp((std::streamoff)off);
        f.write(reinterpret_cast<const char *>(bytes.data()), (std::streamsize)bytes.size());
    }
    // Applies fn to every record of every bank of the container.
    static void patch_records(const std::string &c, uint64_t field_off, const std::vector<uint8_t> &bytes) {
        std::ifstream in(c + "/manifest.json");
        nlohmann::json j = nlohmann::json::parse(in);
        for (auto &[k, b] : j["layers"].items()) {
            uint64_t stride = b["bytes"].get<uint64_t>() / b["experts"].get<uint64_t>();
            for (uint64_t e = 0; e < b["experts"].get<uint64_t>(); e++)
                patch(c + "/" + b["file"].get<std::string>(), e * stride + field_off, bytes);
        }
    }
    // Expects open to fail with code and a message containing each needle.
    static void expect_open_error(const std::string &c, sluice_status code, std::vector<std::string> needles) {
        sluice_ctx *ctx = nullptr;
        sluice_status st = sluice_open(c.c_str(), nullptr, &ctx);
        std::string msg = sluice_last_error(ctx);
        std::printf("  open -> %s: %s\n", sluice_status_name(st), msg.c_str());
        EXPECT_EQ(st, code) << msg;
        for (auto &n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
        sluice_close(ctx);
    }
    // Opens fine, then expects eval of a 40-token prompt to fail.
    static void expect_eval_error(const std::string &c, sluice_status code, std::vector<std::string> needles,
                                  bool verify = false) {
        sluice_config cfg;
        sluice_config_default(&cfg);
        cfg.verify_records = verify;
        sluice_ctx *ctx = nullptr;
        ASSERT_EQ(sluice_open(c.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
        const auto ids = fixture_cases("kimi-linear-tiny")[2].ids;
        std::vector<float> lg((size_t)sluice_n_vocab(ctx));
        sluice_status st = sluice_eval(ctx, ids.data(), ids.size(), lg.data());
        std::string msg = sluice_last_error(ctx);
        std::printf("  eval -> %s: %s\n", sluice_status_name(st), msg.c_str());
        EXPECT_EQ(st, code) << msg;
        for (auto &n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
        // A failed eval leaves the session as it was (position 0): the same
        // call fails the same way, never with a "broken session" state.
        EXPECT_EQ(sluice_n_past(ctx), 0);
        EXPECT_EQ(sluice_eval(ctx, ids.data(), ids.size(), lg.data()), code);
        EXPECT_EQ(sluice_n_past(ctx), 0);
        EXPECT_EQ(sluice_reset(ctx), SLUICE_OK);
        sluice_close(ctx);
    }
    fs::path dir_;
};

TEST_F(BadInput, TruncatedTrunk) {
    std::string c = copy("kimi-linear-tiny");
    fs::resize_file(c + "/trunk.bin", fs::file_size(c + "/trunk.bin") / 2);
    expect_open_error(c, SLUICE_E_IO, {"trunk.bin", "tensor '", "past the end"});
}

TEST_F(BadInput, TruncatedExpertBank) {
    // Found at open since issue 16: a bank shorter than layers.N.bytes.
    std::string c = copy("kimi-linear-tiny");
    fs::resize_file(c + "/experts-L1.bin", 4096 * 3);  // less than one record
    expect_open_error(c, SLUICE_E_FORMAT, {"layers.1.bytes", "experts-L1.bin", "holds 12288 bytes"});
}

TEST_F(BadInput, BadRecordMagic) {
    std::string c = copy("kimi-linear-tiny");
    patch_records(c, 0, {'X', 'X', 'X', 'X'});
    expect_eval_error(c, SLUICE_E_IO, {"experts-L1.bin", "of layer 1", "bad magic"});
}

TEST_F(BadInput, WrongExpertId) {
    std::string c = copy("kimi-linear-tiny");
    patch_records(c, 6, {0x39, 0x05});
    expect_eval_error(c, SLUICE_E_IO, {"expert id field is 1337"});
}

TEST_F(BadInput, OffsetsPastTheRecord) {
    std::string c = copy("kimi-linear-tiny");
    patch_records(c, 28, {0xff, 0xff, 0xff, 0x7f});  // down_off
    expect_eval_error(c, SLUICE_E_IO, {"offsets out of order or past the record"});
}

TEST_F(BadInput, IndexRegionTooSmall) {
    std::string c = copy("kimi-linear-tiny");
    patch_records(c, 24, {49, 0, 0, 0});  // up_off right after gate_off
    expect_eval_error(c, SLUICE_E_IO, {"smaller than its matrix"});
}

TEST_F(BadInput, FmtDisagreesWithManifest) {
    std::string c = copy("kimi-linear-tiny");
    patch_records(c, 8, {8});  // VQ4P fmt byte in an 8-bit-index container
    expect_eval_error(c, SLUICE_E_IO, {"fmt 8 disagrees"});
}

TEST_F(BadInput, ChecksumMismatchOnlyWithVerify) {
    std::string c = copy("kimi-linear-tiny");
    patch_records(c, 100, {0x5A});
    expect_eval_error(c, SLUICE_E_IO, {"checksum mismatch", "of layer 1"}, /*verify=*/true);
}

TEST_F(BadInput, AbsurdDimension) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["config"]["hidden_size"] = 1e12; });
    expect_open_error(c, SLUICE_E_FORMAT, {"config.hidden_size", "outside"});
}

TEST_F(BadInput, NegativeDimension) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["config"]["vocab_size"] = -5; });
    expect_open_error(c, SLUICE_E_FORMAT, {"config.vocab_size"});
}

TEST_F(BadInput, NegativeOffset) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["trunk"][0]["off"] = -4096; });
    expect_open_error(c, SLUICE_E_FORMAT, {"off"});
}

TEST_F(BadInput, HugeShape) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) {
        for (auto &t : j["trunk"])
            if (t["name"] == "lm_head.weight") t["shape"] = {67108864, 67108864};
    });
    expect_open_error(c, SLUICE_E_FORMAT, {"lm_head.weight", "shape"});
}

TEST_F(BadInput, WrongType) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["config"]["num_hidden_layers"] = "4"; });
    expect_open_error(c, SLUICE_E_FORMAT, {"config.num_hidden_layers", "must be a number"});
}

TEST_F(BadInput, ManifestNotJson) {
    std::string c = copy("kimi-linear-tiny");
    std::ofstream(c + "/manifest.json") << "{\"format_version\": 0, \"config\": {";
    expect_open_error(c, SLUICE_E_IO, {"manifest.json", "not valid JSON"});
}

TEST_F(BadInput, WrongFormatVersion) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["format_version"] = 1; });
    expect_open_error(c, SLUICE_E_FORMAT, {"format_version"});
}

TEST_F(BadInput, MissingFiles) {
    std::string c = copy("kimi-linear-tiny");
    fs::remove(c + "/codebooks.bin");
    expect_open_error(c, SLUICE_E_IO, {"codebooks.bin", "cannot open"});
    expect_open_error((dir_ / "does-not-exist").string(), SLUICE_E_IO, {"manifest.json"});
}

TEST_F(BadInput, MissingTensor) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) {
        for (auto &t : j["trunk"])
            if (t["name"] == "model.layers.1.self_attn.b_proj.weight") t["name"] = "renamed";
    });
    expect_open_error(c, SLUICE_E_FORMAT, {"model.layers.1.self_attn.b_proj.weight", "missing"});
}

TEST_F(BadInput, NormMustBeF32) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) {
        for (auto &t : j["trunk"])
            if (t["name"] == "model.norm.weight") {
                t["fmt"] = 2;
                t["scale_off"] = 0;
            }
    });
    expect_open_error(c, SLUICE_E_FORMAT, {"model.norm.weight", "must be F32"});
}

TEST_F(BadInput, BankForDenseLayerAndMissingBank) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["layers"]["0"] = j["layers"]["1"]; });
    expect_open_error(c, SLUICE_E_FORMAT, {"layers.0", "dense layer"});
    c = copy("deepseek-yarn-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["layers"].erase("2"); });
    expect_open_error(c, SLUICE_E_FORMAT, {"MoE layer 2"});
}

TEST_F(BadInput, CodebookBaseOutOfRange) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["layers"]["3"]["codebook_base"] = 1000; });
    expect_open_error(c, SLUICE_E_FORMAT, {"codebook_base"});
}

TEST_F(BadInput, BankFileEscapingTheDirectory) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["layers"]["1"]["file"] = "../../etc/passwd"; });
    expect_open_error(c, SLUICE_E_FORMAT, {"plain file name"});
}

TEST_F(BadInput, UnsupportedRopeIsRefusedNotApproximated) {
    std::string c = copy("deepseek-yarn-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["config"]["rope_scaling"]["type"] = "linear"; });
    expect_open_error(c, SLUICE_E_UNSUPPORTED, {"rope_scaling", "linear"});
}

TEST_F(BadInput, TokenOutOfRangeLeavesSessionUsable) {
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(container_path("kimi-linear-tiny").c_str(), nullptr, &ctx), SLUICE_OK);
    int32_t bad[2] = {3, 999999};
    std::vector<float> lg((size_t)sluice_n_vocab(ctx));
    EXPECT_EQ(sluice_eval(ctx, bad, 2, lg.data()), SLUICE_E_RANGE);
    std::printf("  eval -> %s\n", sluice_last_error(ctx));
    EXPECT_EQ(sluice_n_past(ctx), 0);
    EXPECT_EQ(sluice_eval(ctx, bad, 1, lg.data()), SLUICE_OK);
    EXPECT_EQ(sluice_eval(ctx, nullptr, 0, lg.data()), SLUICE_E_ARG);
    sluice_close(ctx);
}

// ---- issue 16: holes found by a hostile-input probe ----

// layers.N.experts of 0, 0.5, null or missing: a named error from open and
// from the manifest-only plan, never SIGFPE.
TEST_F(BadInput, BankExpertCountNotAPositiveInteger) {
    const std::vector<std::pair<std::string, nlohmann::json>> cases = {
        {"0", 0}, {"0.5", 0.5}, {"null", nullptr}, {"missing", nlohmann::json()}};
    for (const auto &[name, v] : cases) {
        std::string c = copy("kimi-linear-tiny");
        // Bindings copied into the capture: clang 14 cannot capture a structured binding.
        edit_manifest(c, [&, name = name, v = v](nlohmann::json &j) {
            if (name == "missing") j["layers"]["1"].erase("experts");
            else j["layers"]["1"]["experts"] = v;
        });
        std::printf("experts = %s\n", name.c_str());
        expect_open_error(c, SLUICE_E_FORMAT, {"layers.1.experts"});
        sluice_memory_plan p;
        char err[512] = {0};
        EXPECT_EQ(sluice_plan_model(c.c_str(), 0, 0, nullptr, &p, err, sizeof err), SLUICE_E_FORMAT);
        EXPECT_NE(std::string(err).find("layers.1.experts"), std::string::npos) << err;
        fs::remove_all(c);
    }
}

// A bank claiming far more bytes than its file holds: refused at open, the
// key named, before anything is sized from it (was a 16 GiB cache plan).
TEST_F(BadInput, BankBytesLargerThanTheFile) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) {
        j["layers"]["1"]["bytes"] = j["layers"]["1"]["experts"].get<int64_t>() * ((int64_t)8 << 30);
    });
    expect_open_error(c, SLUICE_E_FORMAT, {"layers.1.bytes", "experts-L1.bin", "holds"});
}

// A trunk shape whose element count overflows 64 bits (UBSan in the plan).
TEST_F(BadInput, TrunkShapeProductOverflow) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["trunk"][0]["shape"] = {1 << 26, 1 << 26, 1 << 26, 1 << 26}; });
    expect_open_error(c, SLUICE_E_FORMAT, {"2^40 elements"});
    sluice_memory_plan p;
    char err[512] = {0};
    EXPECT_EQ(sluice_plan_model(c.c_str(), 0, 0, nullptr, &p, err, sizeof err), SLUICE_E_FORMAT) << err;
}

// Every dimension inside [1, 2^26] and the running product at 2^40 before
// the last factor: 2^20 x 2^20 x 2^26 = 2^66 overflowed int64 (UBSan abort;
// a Release build wrapped past the bound and `info` printed figures).
TEST_F(BadInput, TrunkShapeProductPastInt64IsRefused) {
    for (const std::vector<int64_t> &shape : {std::vector<int64_t>{1 << 20, 1 << 20, 1 << 26},
                                              std::vector<int64_t>{1 << 26, 1 << 14, 1 << 26, 1 << 26},
                                              std::vector<int64_t>{1, 1 << 26, 1 << 14, 1 << 26}}) {
        std::string c = copy("kimi-linear-tiny");
        edit_manifest(c, [&](nlohmann::json &j) { j["trunk"][0]["shape"] = shape; });
        expect_open_error(c, SLUICE_E_FORMAT, {"2^40 elements"});
        sluice_memory_plan p;
        char err[512] = {0};
        EXPECT_EQ(sluice_plan_model(c.c_str(), 0, 0, nullptr, &p, err, sizeof err), SLUICE_E_FORMAT) << err;
        fs::remove_all(c);
    }
}

// Issue 32: --verify hashed trunk.bin with reads of its own, so bytes that
// changed between the check and the load passed. Each tensor's range now
// has its digest from the checking pass, compared with the bytes loaded.
// The hook changes every trunk.bin read but the checking pass (one read of
// the whole file: the fixture's trunk is under the 1 MiB chunk).
struct TrunkChangesAfterTheCheck : sluice::IoFaultHook {
    uint64_t size = 0;
    ssize_t pread(int fd, const std::string &path, void *buf, size_t n, uint64_t off) override {
        const ssize_t r = IoFaultHook::pread(fd, path, buf, n, off);
        const bool trunk = path.size() >= 9 && path.compare(path.size() - 9, 9, "trunk.bin") == 0;
        if (trunk && r > 0 && !(off == 0 && (uint64_t)r == size)) static_cast<uint8_t *>(buf)[0] ^= 0x5A;
        return r;
    }
};

TEST_F(BadInput, VerifyChecksTheTrunkBytesThatAreLoaded) {
    std::string c = copy("kimi-linear-tiny");
    ASSERT_NO_FATAL_FAILURE(add_integrity(c));
    ASSERT_LT(fs::file_size(c + "/trunk.bin"), 1u << 20) << "the hook assumes one read for the checking pass";
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.verify_records = 1;
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(c.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    sluice_close(ctx);
    TrunkChangesAfterTheCheck hook;
    hook.size = fs::file_size(c + "/trunk.bin");
    sluice::set_io_fault_hook(&hook);
    ctx = nullptr;
    const sluice_status st = sluice_open(c.c_str(), &cfg, &ctx);
    const std::string msg = sluice_last_error(ctx);
    sluice::set_io_fault_hook(nullptr);
    std::printf("  open --verify, trunk changed after the check -> %s\n", msg.c_str());
    EXPECT_EQ(st, SLUICE_E_FORMAT);
    EXPECT_NE(msg.find("trunk.bin"), std::string::npos);
    EXPECT_NE(msg.find("changed after its SHA-256 check"), std::string::npos);
    sluice_close(ctx);
}

// FIFOs in place of container files: refused, not a hang in open().
TEST_F(BadInput, FifoInsteadOfAFileIsRefused) {
    for (const char *f : {"manifest.json", "trunk.bin", "codebooks.bin", "experts-L1.bin"}) {
        std::string c = copy("kimi-linear-tiny");
        fs::remove(c + "/" + f);
        ASSERT_EQ(::mkfifo((c + "/" + f).c_str(), 0600), 0);
        std::printf("FIFO %s\n", f);
        expect_open_error(c, SLUICE_E_IO, {f, "not a regular file"});
        fs::remove_all(c);
    }
}

// expert_quant edited (stages 3 -> 2): the record offsets give it away
// under --verify; entries 256 -> 64: the codebook headers give it away.
TEST_F(BadInput, ExpertQuantEditsAreCaught) {
    std::string c = copy("kimi-linear-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["expert_quant"]["stages"] = 2; });
    expect_eval_error(c, SLUICE_E_IO, {"experts-L1.bin", "contiguous layout"}, /*verify=*/true);
    c = copy("deepseek-yarn-tiny");
    edit_manifest(c, [](nlohmann::json &j) { j["expert_quant"]["entries"] = 64; });
    expect_open_error(c, SLUICE_E_FORMAT, {"codebooks.bin", "codebook record"});
}

// A NaN in a layer's weights: eval fails naming the first layer it reaches,
// instead of returning NaN logits with SLUICE_OK.
TEST_F(BadInput, NonFiniteHiddenStateNamesTheLayer) {
    std::string c = copy("kimi-linear-tiny");
    std::ifstream in(c + "/manifest.json");
    nlohmann::json j = nlohmann::json::parse(in);
    uint64_t off = 0;
    for (auto &t : j["trunk"])
        if (t["name"] == "model.layers.2.post_attention_layernorm.weight") off = t["off"].get<uint64_t>();
    ASSERT_NE(off, 0u);
    const float nan = NAN;
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &nan, 4);
    patch(c + "/trunk.bin", off, b);
    expect_eval_error(c, SLUICE_E_FORMAT, {"layer 2 ffn", "NaN"});
}

// Outputs never replace a FIFO (or any non-regular file).
TEST_F(BadInput, OutputsNeverReplaceANonRegularFile) {
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(container_path("kimi-linear-tiny").c_str(), nullptr, &ctx), SLUICE_OK);
    const std::string fifo = (dir_ / "out.fifo").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    int32_t t = 3;
    std::vector<float> lg((size_t)sluice_n_vocab(ctx));
    ASSERT_EQ(sluice_eval(ctx, &t, 1, lg.data()), SLUICE_OK);
    EXPECT_EQ(sluice_state_save(ctx, fifo.c_str()), SLUICE_E_IO);
    std::printf("  state_save -> %s\n", sluice_last_error(ctx));
    EXPECT_NE(std::string(sluice_last_error(ctx)).find("not a regular file"), std::string::npos);
    EXPECT_EQ(sluice_save_usage(ctx, fifo.c_str()), SLUICE_E_IO);
    struct stat st;
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
    sluice_close(ctx);
}

// The manifest's integrity checksums (written by `sluice convert`): a trunk
// edit no record crc covers is caught by --verify at open.
TEST_F(BadInput, TrunkChecksumCatchesAnEditUnderVerify) {
    std::string c = copy("kimi-linear-tiny");
    ASSERT_NO_FATAL_FAILURE(add_integrity(c));
    sluice_config cfg;
    sluice_config_default(&cfg);
    cfg.verify_records = 1;
    sluice_ctx *ctx = nullptr;
    ASSERT_EQ(sluice_open(c.c_str(), &cfg, &ctx), SLUICE_OK) << sluice_last_error(ctx);
    sluice_close(ctx);
    ctx = nullptr;
    patch(c + "/trunk.bin", fs::file_size(c + "/trunk.bin") - 3, {0x42});
    EXPECT_EQ(sluice_open(c.c_str(), &cfg, &ctx), SLUICE_E_FORMAT);
    std::string msg = sluice_last_error(ctx);
    std::printf("  open --verify -> %s\n", msg.c_str());
    EXPECT_NE(msg.find("trunk.bin"), std::string::npos);
    EXPECT_NE(msg.find("integrity.trunk_sha256"), std::string::npos);
    sluice_close(ctx);
    // Without --verify the hash is not computed (open stays cheap).
    ctx = nullptr;
    EXPECT_EQ(sluice_open(c.c_str(), nullptr, &ctx), SLUICE_OK);
    sluice_close(ctx);
    edit_manifest(c, [&](nlohmann::json &j) { j["integrity"]["trunk_sha256"] = "xyz"; });
    expect_open_error(c, SLUICE_E_FORMAT, {"integrity.trunk_sha256", "hex"});
}

}  // namespace
