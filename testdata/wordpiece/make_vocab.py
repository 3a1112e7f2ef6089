# Writes the two WordPiece tokenizer.json files of this folder: one vocabulary
# (specials at bert-base-uncased's ids, characters, words, continuations)
# with BertNormalizer uncased (lowercase, accents stripped by default) and
# cased (nothing lowered or stripped). Run: python3 make_vocab.py
import json

vocab = ["[PAD]"] + ["[unused%d]" % i for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
chars = [chr(c) for c in range(33, 127)] + list("ßæøłяжαωé中文字日本語한국") + ["\u0301", "i\u0307"[1]]
words = """the a an of to in and is it that for on with as was at by be this are from or
quick brown fox jumps over lazy dog hello world cafe naive resume un do ##able ##ing ##ed ##s ##er
##ly ##est want wanted wanting play ##ground super ##cal ##if ##rag ##il ##istic ##exp ##ial ##ido
##cious token ##izer ##ization new york san francisco don ' t can ##not emb ##ed ##ding ##s
hel ##lo wor ##ld ca ##fe na ##ive é ##é""".split()
for c in chars:
    vocab.append(c)
for c in chars:
    vocab.append("##" + c)
for w in words:
    if w not in vocab:
        vocab.append(w)
seen = set()
out = []
for p in vocab:
    if p not in seen:
        seen.add(p)
        out.append(p)
vocab = out

def tokenizer(lowercase, strip):
    added = [{"id": vocab.index(s), "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]]
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": strip, "lowercase": lowercase},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [sep], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {p: i for i, p in enumerate(vocab)}},
    }

config = {"tokenizer_class": "BertTokenizer", "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]",
          "pad_token": "[PAD]", "mask_token": "[MASK]", "model_max_length": 512}
for name, lower, strip in [("uncased", True, None), ("cased", False, False)]:
    import os
    os.makedirs(name, exist_ok=True)
    with open(os.path.join(name, "tokenizer.json"), "w") as f:
        json.dump(tokenizer(lower, strip), f, ensure_ascii=False, indent=1)
    with open(os.path.join(name, "tokenizer_config.json"), "w") as f:
        json.dump(dict(config, do_lower_case=lower), f, indent=1)
