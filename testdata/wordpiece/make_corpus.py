# Writes corpus.json: awkward texts for the WordPiece tokenizer.
import json
texts = [
    "",
    "hello world",
    "Hello, World!",
    "The quick brown fox jumps over the lazy dog.",
    "HeLLo WoRLD   the\tquick\nbrown\r\nfox",
    "Café naïve résumé — déjà vu",
    "cafe\u0301 (e + combining acute)",
    "İstanbul İ i\u0307",
    "中文字 日本語中文字abc字",
    "한국 text 한국어",
    "don't can't won't",
    "unwanted wanting played playground",
    "supercalifragilisticexpialidocious",
    "a" * 100,
    "a" * 101,
    "b" * 150 + " the",
    "hello\u0000world\u0007 bell \ufffd replacement",
    "zero\u200bwidth\u200djoiner \u00adsoft hyphen",
    "non\u00a0breaking\u3000ideographic\u2028line",
    "emoji 😀 and ✓ check ☃ snow",
    "thai ภาษาไทย and hindi हिन्दी",
    "[CLS] already [SEP] special [MASK] tokens[SEP]",
    "[cls] lower [sep]",
    "new york san francisco new-york san_francisco",
    "$100.00 + 5% = ~x^2 | <tag> {brace} `tick` @at #hash",
    "¿Qué? ¡Sí! «quote» „low“ ‹single› 【bracket】 、。",
    "tokenizer tokenization embedding embeddings",
    "ΑΩ αω Жя ßÆØŁ",
    "   leading and trailing   ",
    "x",
    "!!!",
    "e\u0301\u0301\u0301",
]
pairs = [
    ["what is the capital?", "Paris is the capital of France."],
    ["Café?", "naïve résumé"],
    ["", "only second"],
    ["中文", "日本語!"],
]
with open("corpus.json", "w") as f:
    json.dump({"texts": texts, "pairs": pairs}, f, ensure_ascii=True, indent=1)
