// Writes golden.json: the ids (with [CLS] and [SEP]) and token types that
// Hugging Face's tokenizers give for corpus.json under each tokenizer of
// this folder, through transformers.js (@huggingface/transformers 3.x, whose
// BertNormalizer, BertPreTokenizer and WordPiece follow the Rust library).
// Run: npm install --ignore-scripts @huggingface/transformers@3 in some
// folder, then NODE_PATH=<that folder>/node_modules node gen_golden.mjs
import fs from "node:fs";
import { createRequire } from "node:module";
const require = createRequire(process.env.NODE_PATH + "/");
const mod = await import(require.resolve("@huggingface/transformers"));
const { AutoTokenizer, env } = mod.AutoTokenizer ? mod : mod.default;
env.allowRemoteModels = false;
env.localModelPath = process.cwd() + "/";
const corpus = JSON.parse(fs.readFileSync("corpus.json", "utf8"));
const out = {};
for (const name of ["uncased", "cased"]) {
  const tok = await AutoTokenizer.from_pretrained(name);
  const texts = corpus.texts.map((t) => tok(t, { return_tensor: false }).input_ids);
  const pairs = corpus.pairs.map(([a, b]) => {
    const e = tok(a, { text_pair: b, return_tensor: false });
    return { ids: e.input_ids, types: e.token_type_ids };
  });
  out[name] = { texts, pairs };
}
fs.writeFileSync("golden.json", JSON.stringify(out) + "\n");
