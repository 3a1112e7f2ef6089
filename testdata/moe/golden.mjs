// Records llama.cpp's greedy tokens for synthetic GGUFs (see README.md):
// node golden.mjs STEPS SHAPE=PATH ...
import {getLlama, LlamaLogLevel} from "node-llama-cpp";
const [,, steps, ...models] = process.argv;
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const prompt = [1, 260, 263, 265, 266, 269, 271, 272, 275, 277, 260, 263, 265, 266, 269];
const tokens = {};
for (const m of models) {
  const [shape, path] = m.split("=");
  const model = await llama.loadModel({modelPath: path});
  const ctx = await model.createContext({contextSize: 256, batchSize: 64});
  const seq = ctx.getSequence();
  // Greedy past end-of-sequence, as Tessera's IgnoreEOS: llama.cpp's
  // generator ends at it, so it is fed back and generation resumes.
  const out = [];
  let input = prompt;
  while (out.length < Number(steps)) {
    let ended = true;
    for await (const t of seq.evaluate(input, {temperature: 0})) {
      out.push(t);
      if (out.length >= Number(steps)) {
        ended = false;
        break;
      }
    }
    if (!ended) break;
    out.push(model.tokens.eos);
    input = [model.tokens.eos];
  }
  out.length = Math.min(out.length, Number(steps));
  tokens[shape] = out;
  await ctx.dispose();
  await model.dispose();
}
console.log(JSON.stringify({source: "llama.cpp (node-llama-cpp 3.21.1, CPU build), greedy, from `tessera synth --shape SHAPE --seed 1 --type f32`", prompt, tokens}, null, 1));
process.exit(0);
