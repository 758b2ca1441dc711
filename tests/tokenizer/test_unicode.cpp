// Unicode classes, UTF-8 validation and U+FFFD substitution.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tokenizer/unicode.h"

using namespace sluice::tok;

TEST(Unicode, Classes) {
    EXPECT_EQ(char_class('a'), kLetter | kLowerish);
    EXPECT_EQ(char_class('A'), kLetter | kUpperish);
    EXPECT_EQ(char_class('7'), kNumber);
    EXPECT_EQ(char_class(' '), kSpace);
    EXPECT_EQ(char_class('\n'), kSpace);
    EXPECT_EQ(char_class(0x85), kSpace);      // NEL is White_Space
    EXPECT_EQ(char_class(0xFEFF), 0);         // BOM is not (JavaScript's \s differs)
    EXPECT_EQ(char_class(0x3000), kSpace);
    EXPECT_EQ(char_class(0x4E2D), kLetter | kUpperish | kLowerish | kHan);
    EXPECT_EQ(char_class(0x3005), kLetter | kUpperish | kLowerish | kHan);  // 々 Lm
    EXPECT_EQ(char_class(0x3007), kNumber | kHan);                          // 〇 Nl
    EXPECT_EQ(char_class(0x2E80), kHan);                                    // radical, So
    EXPECT_EQ(char_class(0x3001), 0);                                       // 、 is Common
    EXPECT_EQ(char_class(0x0301), kUpperish | kLowerish);                   // combining acute
    EXPECT_EQ(char_class(0x01C5), kLetter | kUpperish);                     // ǅ Lt
    EXPECT_EQ(char_class(0x0660), kNumber);                                 // Arabic-Indic zero
    EXPECT_EQ(char_class(0x1F600), 0);
    EXPECT_EQ(char_class(0x110000), 0);
}

TEST(Unicode, VersionsAgree) {
    // utf8proc's categories and the Han table must describe one Unicode.
    std::string u = utf8proc_unicode_version();
    std::string h = han_unicode_version();
    EXPECT_EQ(u.substr(0, u.rfind('.')), h.substr(0, h.rfind('.'))) << "utf8proc " << u << " vs Scripts " << h;
}

namespace {
// Code points of `prop` in a UCD file (Scripts.txt, PropList.txt).
bool ucd_set(const std::string &path, const std::string &prop, std::vector<bool> &set) {
    std::ifstream f(path);
    if (!f) return false;
    set.assign(0x110000, false);
    std::string line;
    while (std::getline(f, line)) {
        auto hash = line.find('#');
        std::string body = line.substr(0, hash);
        auto semi = body.find(';');
        if (semi == std::string::npos) continue;
        std::string cps = body.substr(0, semi), name = body.substr(semi + 1);
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        if (name != prop) continue;
        auto dots = cps.find("..");
        uint32_t lo = std::stoul(cps.substr(0, dots), nullptr, 16);
        uint32_t hi = dots == std::string::npos ? lo : std::stoul(cps.substr(dots + 2), nullptr, 16);
        for (uint32_t c = lo; c <= hi; ++c) set[c] = true;
    }
    return true;
}
}  // namespace

TEST(Unicode, HanTableMatchesScriptsTxt) {
    std::vector<bool> han;
    if (!ucd_set("/usr/share/unicode/Scripts.txt", "Han", han))
        GTEST_SKIP() << "/usr/share/unicode/Scripts.txt missing (Debian package unicode-data)";
    for (uint32_t c = 0; c < 0x110000; ++c)
        ASSERT_EQ(bool(char_class(c) & kHan), bool(han[c])) << "U+" << std::hex << c;
}

TEST(Unicode, SpaceMatchesWhiteSpaceProperty) {
    std::vector<bool> ws;
    if (!ucd_set("/usr/share/unicode/PropList.txt", "White_Space", ws))
        GTEST_SKIP() << "/usr/share/unicode/PropList.txt missing (Debian package unicode-data)";
    for (uint32_t c = 0; c < 0x110000; ++c)
        ASSERT_EQ(bool(char_class(c) & kSpace), bool(ws[c])) << "U+" << std::hex << c;
}

TEST(Unicode, Validation) {
    EXPECT_TRUE(is_valid_utf8(""));
    EXPECT_TRUE(is_valid_utf8("plain ascii"));
    EXPECT_TRUE(is_valid_utf8("\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF"));
    for (const char *bad : {"\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF0\x80\x80\x80",
                            "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xE4\xB8", "\xC3"})
        EXPECT_FALSE(is_valid_utf8(bad)) << bad;
}

TEST(Unicode, MaximalSubpartReplacement) {
    const std::string R = "\xEF\xBF\xBD";
    EXPECT_EQ(sanitize_utf8("ok"), "ok");
    EXPECT_EQ(sanitize_utf8("\xC0\xAF"), R + R);              // C0 never starts a sequence
    EXPECT_EQ(sanitize_utf8("\xE0\x80\x80"), R + R + R);      // overlong: E0 needs A0..BF next
    EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), R + R + R);      // surrogate
    EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), R + R + R + R);
    EXPECT_EQ(sanitize_utf8("\xE2\x82" "A"), R + "A");        // truncated: one U+FFFD
    EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98"), R);              // truncated at the end
    EXPECT_EQ(sanitize_utf8("a\xFF" "b\x80" "c"), "a" + R + "b" + R + "c");
    EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

TEST(Unicode, IncompleteTail) {
    EXPECT_EQ(incomplete_utf8_tail(""), 0u);
    EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
    EXPECT_EQ(incomplete_utf8_tail("a\xE4"), 1u);
    EXPECT_EQ(incomplete_utf8_tail("a\xE4\xB8"), 2u);
    EXPECT_EQ(incomplete_utf8_tail("a\xE4\xB8\xAD"), 0u);
    EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98"), 3u);
    EXPECT_EQ(incomplete_utf8_tail("\xE0\x80"), 0u);  // can never complete
    EXPECT_EQ(incomplete_utf8_tail("\x80\x80"), 0u);
    EXPECT_EQ(incomplete_utf8_tail("\xC3"), 1u);
}
