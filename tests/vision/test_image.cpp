// Decoding, grid choice and preprocessing (VISION.md §3-4), independent of
// any container, plus the fixture's pixel tensors (bit-exact).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "fixtures_util.h"
#include "vision/image.h"

using namespace sluice::vision;

namespace {

// A 24-bit bottom-up BMP, written by hand: the simplest format stb reads.
std::vector<uint8_t> make_bmp(int w, int h, uint8_t r, uint8_t g, uint8_t b) {
    const int stride = (w * 3 + 3) & ~3;
    const uint32_t size = 54 + (uint32_t)(stride * h);
    std::vector<uint8_t> v(size, 0);
    auto put32 = [&](size_t at, uint32_t x) { std::memcpy(&v[at], &x, 4); };
    auto put16 = [&](size_t at, uint16_t x) { std::memcpy(&v[at], &x, 2); };
    v[0] = 'B', v[1] = 'M';
    put32(2, size);
    put32(10, 54);
    put32(14, 40);
    put32(18, (uint32_t)w);
    put32(22, (uint32_t)h);
    put16(26, 1);
    put16(28, 24);
    put32(34, (uint32_t)(stride * h));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = &v[54 + (size_t)y * stride + (size_t)x * 3];
            p[0] = b, p[1] = g, p[2] = r;
        }
    return v;
}

std::string vision_dir() { return sluice_test::fixtures_dir() + "/vision"; }

}  // namespace

TEST(VisionGrid, WorkedValues) {
    struct C {
        int sw, sh, gh, gw;
    } cases[] = {{100, 60, 4, 6}, {553, 357, 26, 38}, {56, 28, 2, 4}, {3, 5, 2, 2}, {896, 896, 32, 32}, {1000, 20, 2, 70}};
    for (const C &c : cases) {
        Grid g = choose_grid(c.sw, c.sh, 1024);
        EXPECT_EQ(g.gh, c.gh) << c.sw << "x" << c.sh;
        EXPECT_EQ(g.gw, c.gw) << c.sw << "x" << c.sh;
    }
    Grid g = choose_grid(700, 700, 64);
    EXPECT_EQ(g.gh, g.gw);
    EXPECT_LE(g.gh * g.gw, 64);
    EXPECT_GE(g.gh, 2);
}

TEST(VisionImage, SolidColourNormalises) {
    const uint8_t rgb[3] = {200, 100, 30};
    std::vector<uint8_t> bmp = make_bmp(56, 28, rgb[0], rgb[1], rgb[2]);
    RgbImage img;
    ASSERT_TRUE(decode_image(bmp.data(), bmp.size(), "solid.bmp", &img).is_ok());
    ASSERT_EQ(img.width, 56);
    ASSERT_EQ(img.height, 28);
    Grid g = choose_grid(img.width, img.height, 1024);
    ASSERT_EQ(g.gh, 2);
    ASSERT_EQ(g.gw, 4);
    const float mean[3] = {0.5f, 0.45f, 0.4f}, sd[3] = {0.5f, 0.55f, 0.6f};
    std::vector<float> px((size_t)g.gh * g.gw * kPatchValues);
    preprocess(img, g, mean, sd, px.data());
    double max_err = 0;
    for (size_t p = 0; p < (size_t)g.gh * g.gw; p++)
        for (int c = 0; c < 3; c++)
            for (int k = 0; k < 196; k++) {
                const float want = ((float)rgb[c] / 255.0f - mean[c]) / sd[c];
                max_err = std::max(max_err, (double)std::fabs(px[p * kPatchValues + c * 196 + k] - want));
            }
    std::printf("solid colour: max|diff| %.3g over %zu samples\n", max_err, px.size());
    EXPECT_LE(max_err, 1e-6);
}

TEST(VisionImage, RefusesNonImagesAndHugeHeaders) {
    const std::string junk = "this is not an image at all, just text";
    RgbImage img;
    sluice::Status st = decode_image((const uint8_t *)junk.data(), junk.size(), "junk.png", &img);
    EXPECT_EQ(st.code(), SLUICE_E_IO);
    EXPECT_NE(st.message().find("junk.png"), std::string::npos) << st.message();
    // A BMP header claiming 65535 x 65535 and no pixel data: refused from
    // the header, before any decode is attempted.
    std::vector<uint8_t> bmp = make_bmp(2, 2, 1, 2, 3);
    uint32_t big = 65535;
    std::memcpy(&bmp[18], &big, 4);
    std::memcpy(&bmp[22], &big, 4);
    st = decode_image(bmp.data(), bmp.size(), "huge.bmp", &img);
    EXPECT_EQ(st.code(), SLUICE_E_IO);
    EXPECT_NE(st.message().find("pixel limit"), std::string::npos) << st.message();
    // A PNG that stops after its header: the probe passes, the decode
    // fails, and the error names the image.
    const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 40,
                           0, 0, 0, 40, 8, 2, 0, 0, 0, 0, 0, 0, 0};
    std::vector<uint8_t> cut(png, png + sizeof png);
    int w = 0, h = 0;
    ASSERT_TRUE(image_dimensions(cut.data(), cut.size(), "cut.png", &w, &h).is_ok());
    EXPECT_EQ(w, 40);
    st = decode_image(cut.data(), cut.size(), "cut.png", &img);
    EXPECT_EQ(st.code(), SLUICE_E_IO);
    EXPECT_NE(st.message().find("cut.png"), std::string::npos) << st.message();
    st = decode_image(nullptr, 0, "empty", &img);
    EXPECT_EQ(st.code(), SLUICE_E_IO);
}

TEST(VisionImage, FixturePixelsBitExact) {
    if (!std::filesystem::exists(vision_dir() + "/out/cases.json"))
        GTEST_SKIP() << "no " << vision_dir() << " (../shared absent)";
    const float mean[3] = {0.5f, 0.45f, 0.4f}, sd[3] = {0.5f, 0.55f, 0.6f};
    struct C {
        const char *name;
        int gh, gw;
    } cases[] = {{"img_a", 4, 6}, {"img_b", 26, 38}};
    for (const C &c : cases) {
        std::vector<uint8_t> bytes;
        ASSERT_TRUE(read_image_file(vision_dir() + "/images/" + c.name + ".png", &bytes).is_ok());
        RgbImage img;
        ASSERT_TRUE(decode_image(bytes.data(), bytes.size(), c.name, &img).is_ok());
        Grid g = choose_grid(img.width, img.height, 1024);
        ASSERT_EQ(g.gh, c.gh);
        ASSERT_EQ(g.gw, c.gw);
        std::vector<float> px((size_t)g.gh * g.gw * kPatchValues);
        preprocess(img, g, mean, sd, px.data());
        std::vector<float> want = sluice_test::read_f32(vision_dir() + "/out/" + c.name + ".pixels.f32");
        ASSERT_EQ(want.size(), px.size());
        size_t differ = 0;
        for (size_t i = 0; i < px.size(); i++) differ += std::memcmp(&px[i], &want[i], 4) != 0;
        sluice_test::DiffStats d = sluice_test::diff_stats(px, want);
        std::printf("%s pixels: %zu values, %zu not bit-identical; max|diff| %.3g\n", c.name, px.size(), differ,
                    d.max_abs);
        EXPECT_EQ(differ, 0u) << c.name;
    }
}

// Damaged images: random byte flips and truncations of a valid BMP (and of
// the fixture PNG when present) either decode or are refused by name; never
// a crash (run under ASan/UBSan in the sanitizer build).
TEST(VisionImage, DamagedImagesAreRefusedOrDecoded) {
    std::vector<std::vector<uint8_t>> seeds = {make_bmp(30, 20, 9, 99, 199)};
    const std::string png = vision_dir() + "/images/img_a.png";
    if (std::filesystem::exists(png)) {
        std::vector<uint8_t> b;
        if (read_image_file(png, &b).is_ok()) seeds.push_back(b);
    }
    uint64_t s = 0x9E3779B97F4A7C15ull;
    auto rnd = [&]() { return s = s * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(s >> 33); };
    int refused = 0, decoded = 0;
    for (const auto &seed : seeds)
        for (int it = 0; it < 300; it++) {
            std::vector<uint8_t> v = seed;
            const int flips = 1 + (int)(rnd() % 8);
            for (int f = 0; f < flips; f++) v[rnd() % v.size()] ^= (uint8_t)(1u << (rnd() % 8));
            if (rnd() % 3 == 0) v.resize(1 + rnd() % v.size());
            RgbImage img;
            sluice::Status st = decode_image(v.data(), v.size(), "damaged", &img);
            if (st.is_ok()) {
                decoded++;
                EXPECT_EQ(img.rgb.size(), (size_t)img.width * img.height * 3);
            } else {
                refused++;
                EXPECT_EQ(st.code(), SLUICE_E_IO);
                EXPECT_NE(st.message().find("damaged"), std::string::npos) << st.message();
            }
        }
    std::printf("damaged images: %d decoded, %d refused with a named error\n", decoded, refused);
    EXPECT_GT(refused, 0);
}
