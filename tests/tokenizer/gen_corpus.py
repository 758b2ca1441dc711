#!/usr/bin/env python3
"""Deterministic corpus for the tokenizer differential tests.

Writes records "<byte length>\\n<bytes>\\n" (a text may hold any byte,
newlines included) and prints how many records each category got.
Categories: English, code, whitespace runs, digits, contractions, CJK,
Arabic, Hebrew, Devanagari, Thai, Georgian, combining marks, emoji with ZWJ,
mixed scripts, special-token strings, random code points, long texts and
invalid UTF-8.

Characters are drawn only from code points assigned in Python's
unicodedata (Unicode 14), so every implementation compared (utf8proc 15,
Python regex 15, Node's ICU, Rust's regex tables) knows them.

With --profile english it writes instead an English-heavy corpus for the
throughput benchmark (bench/tokenizer_bench.sh): documents of prose
paragraphs with some code and numbers, about 1.5 MB.

Usage: gen_corpus.py OUT [--seed N] [--profile mixed|english]
"""
import random
import sys
import unicodedata

WORDS = {
    "en": "the of and to in is was he for it with as his on be at by had are but from or have an they which one you "
          "were all we her she there would their will when who him been has more if no out do so can what up said "
          "about other into than its time only could new them man some these then two first may any like now my such "
          "make over our even most me state after also made many did must before back see through way where get "
          "much go well your know should down work year because come people just say each those take day good how "
          "long Mr own too little use US very great still men here life both between old under last never place same "
          "another think house while high right might came off find states since used give against three himself "
          "look few general hand school part small American home during number again Mrs around thought went without "
          "however govern don't united set world hello weather Paris city JSON true false null OpenAI GPT tokenizer "
          "McDonald iPhone eBay NASA HTTPServer XMLHttpRequest camelCase snake_case ALLCAPS".split(),
    "zh": "我们 你好 世界 中国 北京 上海 人工智能 机器学习 自然语言 处理 天气 今天 明天 学习 工作 生活 时间 问题 "
          "发展 经济 社会 文化 历史 科学 技术 数据 模型 训练 推理 龍 體 國 學 們 說 們 這 裡".split(),
    "ja": "こんにちは ありがとう 日本語 東京 ひらがな カタカナ テスト 漢字 人々 時々 勉強 します でした "
          "コンピュータ ソフトウェア ラーメン 寿司 桜 富士山 〆切 ヶ月 ー".split(),
    "ko": "안녕하세요 한국어 서울 감사합니다 컴퓨터 사랑 대한민국 학교 선생님 ㅋㅋㅋ ㅎㅎ".split(),
    "ar": "مرحبا العالم اللغة العربية كتاب مدرسة السلام عليكم شكرا جزيلا الذكاء الاصطناعي بِسْمِ اللَّهِ "
          "الرَّحْمَٰنِ مُحَمَّد ١٢٣ ٤٥٦٧ ٨٩٠".split(),
    "he": "שלום עולם עברית ספר בית ספר תודה רבה שָׁלוֹם בְּרֵאשִׁית אֱלֹהִים ירושלים".split(),
    "hi": "नमस्ते दुनिया हिन्दी भाषा भारत धन्यवाद कृपया विद्यालय क्षत्रिय ज्ञान संस्कृत १२३ ४५६ ॐ".split(),
    "th": "สวัสดี ครับ ค่ะ ภาษาไทย ประเทศไทย ขอบคุณ กรุงเทพมหานคร น้ำ ผู้หญิง ๑๒๓".split(),
    "ka": "გამარჯობა საქართველო თბილისი ენა მადლობა ᲒᲐᲛᲐᲠᲯᲝᲑᲐ ქართული".split(),
    "ru": "Привет мир русский язык Москва спасибо Ёлка ЁЖИК".split(),
    "el": "Γειά σου κόσμε Ελληνικά ΑΘΗΝΑ ἀρχή ὅτι".split(),
}
PUNCT = list(".,;:!?-()[]{}\"'/\\@#$%^&*_+=<>|~`") + ["...", "—", "–", "«", "»", "“", "”", "‘", "’", "、", "。",
                                                    "！", "？", "（", "）", "・", "¿", "¡", "§", "°", "€", "£", "¥"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\n\n", "   ", "\r", "\x0b", "\x0c", "\u00a0", "\u3000", "\u2003",
          "\u2009", "\u202f", "\u0085", "\u2028", "\u2029", "\ufeff", "\u200b", "\u180e", " \n ", "\t\t\n"]
EMOJI = ["😀", "🤖", "👍", "👍🏽", "👨‍👩‍👧‍👦", "👩🏾‍💻", "🏳️‍🌈", "🏴‍☠️", "🇯🇵", "🇺🇸🇫🇷", "1️⃣", "#️⃣", "❤️", "✨",
         "🧑‍🤝‍🧑", "👁️‍🗨️", "🐈‍⬛", "💯", "🎉🎉🎉", "©️", "™", "☃", "⚡"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D", "'Re",
                "'rE", "'ſ", "'x", "'", "''", "'ll've", "’s"]
SPECIALS = ["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|im_end|>",
            "<|im_start|>", "[BOS]", "<|endoftext", "endoftext|>", "<|<|endoftext|>|>"]
INVALID = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xc3", b"\xe0\x80\x80", b"\xe0\xa0", b"\xed\xa0\x80",
           b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80", b"\xf8\x88\x80\x80\x80", b"\xfe",
           b"\xff", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xf0\x9f", b"\x80\x80\x80", b"\xc3\x28", b"\xe2\x28\xa1"]
# Broad blocks to sample random characters from (filtered to assigned ones).
RANGES = [(0x20, 0x7E), (0xA0, 0x24F), (0x250, 0x36F), (0x370, 0x52F), (0x530, 0x58F), (0x590, 0x5FF),
          (0x600, 0x6FF), (0x900, 0x97F), (0x980, 0x9FF), (0xE00, 0xE7F), (0x10A0, 0x10FF), (0x1100, 0x11FF),
          (0x1E00, 0x1FFF), (0x2000, 0x206F), (0x2070, 0x218F), (0x2190, 0x23FF), (0x2460, 0x24FF),
          (0x2500, 0x27BF), (0x2E80, 0x2FDF), (0x3000, 0x30FF), (0x3190, 0x31FF), (0x3200, 0x33FF),
          (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xA4CF), (0xAC00, 0xD7A3), (0xF900, 0xFAFF),
          (0xFB00, 0xFDFF), (0xFE00, 0xFE6F), (0xFF00, 0xFFEF), (0x10000, 0x1007F), (0x10300, 0x1034F),
          (0x1D400, 0x1D7FF), (0x1F000, 0x1F0FF), (0x1F300, 0x1F6FF), (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF),
          (0x2F800, 0x2FA1F), (0x16FE0, 0x16FF1)]


def assigned(cp):
    c = chr(cp)
    return unicodedata.category(c) not in ("Cn", "Cs")


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def words(self, lang, n):
        return [self.r.choice(WORDS[lang]) for _ in range(n)]

    def sentence(self, lang="en"):
        sep = "" if lang in ("zh", "ja") else " "
        ws = self.words(lang, self.r.randint(3, 18))
        if lang == "en" and self.r.random() < 0.5:
            ws[0] = ws[0].capitalize()
        s = sep.join(ws)
        if self.r.random() < 0.6:
            s += self.r.choice([".", "!", "?", "。", "…", ":", ";"])
        return s

    def english(self):
        parts = [self.sentence("en") for _ in range(self.r.randint(1, 4))]
        s = " ".join(parts)
        if self.r.random() < 0.3:
            s = s.upper() if self.r.random() < 0.5 else s.title()
        return s

    def code(self):
        r = self.r
        name = r.choice(["foo", "bar_baz", "getValue", "HTTPClient", "x1", "__init__", "i", "parse_json"])
        snippets = [
            f"def {name}(self, x):\n    return x * {r.randint(0, 999)}  # comment\n",
            f"for (int i = 0; i < {r.randint(1, 10**6)}; ++i) {{\n\tsum += a[i] / 2;\n}}",
            f"const {name} = async () => {{ await fetch('https://example.com/api/v1/{name}?q=1&x=2'); }};",
            f'{{"key": "{name}", "value": [{r.randint(0, 99)}, {r.random():.6f}, null, true], "nested": {{}}}}',
            f"#include <stdio.h>\nint main(void) {{ printf(\"%d\\n\", {r.randint(0, 9999)}); return 0; }}\n",
            f"SELECT * FROM users WHERE id = {r.randint(1, 99999)} AND name LIKE '%{name}%';",
            f"    if x != None and y >= 0:\n        {name}(x, y)\n\n\n",
            f"/usr/local/bin/{name} --flag=1 2>&1 | grep -v '^#' > /dev/null",
            f"<div class=\"{name}\"><a href=\"/path/to/{name}.html\">link</a></div>",
            f"x = [{', '.join(str(r.randint(-500, 5000)) for _ in range(r.randint(1, 8)))}]",
            f"fn {name}<'a>(s: &'a str) -> Result<Vec<u8>, Box<dyn Error>> {{ Ok(s.bytes().collect()) }}",
            f"// TODO({name}): fix   this\r\n\t\t  return;\r\n",
        ]
        return "".join(r.choice(snippets) for _ in range(r.randint(1, 3)))

    def whitespace(self):
        r = self.r
        out = []
        for _ in range(r.randint(1, 10)):
            out.append("".join(r.choice(SPACES) for _ in range(r.randint(1, 5))))
            if r.random() < 0.7:
                out.append(r.choice(self.words("en", 1) + PUNCT + ["1", "中", "é"]))
        return "".join(out)

    def digits(self):
        r = self.r
        forms = [lambda: str(r.randint(0, 10 ** r.randint(1, 20))),
                 lambda: f"{r.random() * 1e6:.{r.randint(0, 8)}f}",
                 lambda: f"{r.randint(1, 12)}/{r.randint(1, 31)}/{r.randint(1900, 2100)}",
                 lambda: f"+1 ({r.randint(100, 999)}) {r.randint(100, 999)}-{r.randint(1000, 9999)}",
                 lambda: f"{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}",
                 lambda: "".join(r.choice("٠١٢٣٤٥٦٧٨٩०१२३४५६७८९１２３４５６７８９²³¹¼½ⅫⅣ①②") for _ in range(r.randint(1, 9))),
                 lambda: f"v{r.randint(0, 9)}.{r.randint(0, 99)}.{r.randint(0, 999)}",
                 lambda: f"{r.randint(1, 99999)}{r.choice(['km', 'kg', '%', 'px', 'th', 'st', '元', '円'])}"]
        return " ".join(r.choice(forms)() for _ in range(r.randint(1, 6)))

    def contractions(self):
        r = self.r
        out = []
        for _ in range(r.randint(1, 8)):
            w = r.choice(WORDS["en"] + ["I", "WE", "ʼx", "Ǆ", "ǅ", "é", "中", "123", ""])
            out.append(w + r.choice(CONTRACTIONS) + r.choice(["", " ", "s", "x", "\n", "'", "ll"]))
        return r.choice([" ", "", "  "]).join(out)

    def script(self, lang):
        s = self.sentence(lang)
        if self.r.random() < 0.3:
            s += self.r.choice(SPACES) + self.sentence(lang)
        return s

    def cjk(self):
        return "".join(self.script(self.r.choice(["zh", "ja", "ko"])) + self.r.choice(["", " ", "、", "\n", "123"])
                       for _ in range(self.r.randint(1, 3)))

    def combining(self):
        r = self.r
        out = []
        for _ in range(r.randint(1, 10)):
            base = r.choice(["a", "e", "o", "A", "Z", "i", " ", "1", "中", "", "ß", "'", "\n", "α", "я"])
            marks = "".join(chr(r.choice([0x300, 0x301, 0x302, 0x308, 0x323, 0x327, 0x20DD, 0x0903, 0x093F,
                                           0x05B8, 0x0651, 0x0E31, 0x1AB0, 0x1DC0, 0xFE0F, 0x200D]))
                            for _ in range(r.randint(0, 4)))
            out.append(base + marks)
        return "".join(out)

    def emoji(self):
        r = self.r
        return "".join(r.choice(EMOJI) + r.choice(["", " ", "a", "\n", "!", "中", "1"]) for _ in range(r.randint(1, 8)))

    def mixed(self):
        r = self.r
        langs = list(WORDS)
        pieces = []
        for _ in range(r.randint(2, 12)):
            k = r.random()
            if k < 0.6:
                pieces.append(r.choice(WORDS[r.choice(langs)]))
            elif k < 0.75:
                pieces.append(r.choice(PUNCT))
            elif k < 0.85:
                pieces.append(r.choice(EMOJI))
            else:
                pieces.append(str(r.randint(0, 99999)))
            pieces.append(r.choice(["", " ", " ", "  ", "\n", "\t", "-", "/"]))
        return "".join(pieces)

    def randchars(self):
        r = self.r
        out = []
        n = r.randint(1, 40)
        while len(out) < n:
            lo, hi = r.choice(RANGES)
            cp = r.randint(lo, hi)
            if assigned(cp):
                out.append(chr(cp))
        return "".join(out)

    def specials(self):
        r = self.r
        return "".join(r.choice(SPECIALS + [" ", "hi", "\n", "<|", "|>"]) for _ in range(r.randint(1, 8)))

    def long_text(self):
        # Long pieces take sluice's heap merge (> 128 bytes). Sizes stay
        # moderate because js-tiktoken's merge is quadratic in piece length.
        r = self.r
        kind = r.choice(["prose", "spaces", "digits", "nospace", "marks"])
        if kind == "prose":
            return "\n".join(self.english() for _ in range(60))
        if kind == "spaces":
            return "x" + " " * r.randint(200, 1200) + "y" + "\n" * r.randint(10, 300) + " " * 50
        if kind == "digits":
            return "".join(str(r.randint(0, 9)) for _ in range(r.randint(1000, 4000)))
        if kind == "marks":
            return "a" + "\u0301" * r.randint(100, 500) + "b"
        return "".join(r.choice("abcdefghij!@#$%^&*()_+-=") for _ in range(r.randint(2000, 6000)))

    def invalid(self):
        r = self.r
        base = r.choice([self.english, self.cjk, self.emoji, self.code, self.randchars])().encode("utf-8")
        out = bytearray(base)
        for _ in range(r.randint(1, 4)):
            pos = r.randint(0, len(out))
            out[pos:pos] = r.choice(INVALID)
        if r.random() < 0.2:  # cut in the middle of a character
            out = out[:r.randint(0, len(out))]
        return bytes(out)


def english_docs(g, n_docs):
    """Documents as a chat or document-ingest workload sends them: paragraphs
    of prose (most of the bytes), now and then a code block or numbers."""
    r = g.r
    docs = []
    for _ in range(n_docs):
        paras = []
        for _ in range(r.randint(3, 12)):
            k = r.random()
            if k < 0.84:
                paras.append(" ".join(g.sentence("en") for _ in range(r.randint(2, 8))))
            elif k < 0.94:
                paras.append(g.code())
            else:
                paras.append(g.digits())
        docs.append("\n\n".join(paras))
    return docs


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: gen_corpus.py OUT [--seed N] [--profile mixed|english]")
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 20240601
    profile = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else "mixed"
    g = Gen(seed)
    if profile == "english":
        docs = english_docs(g, 800)
        with open(sys.argv[1], "wb") as f:
            for t in docs:
                b = t.encode("utf-8")
                f.write(str(len(b)).encode() + b"\n" + b + b"\n")
        print(f"corpus: {len(docs)} English-heavy documents, {sum(len(t.encode()) for t in docs)} bytes")
        return
    if profile != "mixed":
        sys.exit(f"gen_corpus.py: unknown profile {profile}")
    plan = [("english", g.english, 700), ("code", g.code, 500), ("whitespace", g.whitespace, 500),
            ("digits", g.digits, 400), ("contractions", g.contractions, 400), ("cjk", g.cjk, 400),
            ("arabic", lambda: g.script("ar"), 200), ("hebrew", lambda: g.script("he"), 200),
            ("devanagari", lambda: g.script("hi"), 200), ("thai", lambda: g.script("th"), 200),
            ("georgian", lambda: g.script("ka"), 150), ("cyrillic_greek", lambda: g.script(g.r.choice(["ru", "el"])), 150),
            ("combining", g.combining, 300), ("emoji", g.emoji, 300), ("mixed", g.mixed, 600),
            ("specials", g.specials, 150), ("random_chars", g.randchars, 500), ("long", g.long_text, 20),
            ("invalid_utf8", g.invalid, 400)]
    counts = []
    with open(sys.argv[1], "wb") as f:
        for name, fn, n in plan:
            for _ in range(n):
                t = fn()
                b = t if isinstance(t, bytes) else t.encode("utf-8")
                f.write(str(len(b)).encode() + b"\n" + b + b"\n")
            counts.append(f"{name}={n}")
    print(f"corpus: {sum(n for _, _, n in plan)} records ({', '.join(counts)})")


if __name__ == "__main__":
    main()
