// client.js is the low-level side of Tessera in the browser: a small client
// that starts worker.js (the engine, Go compiled to wasm, on WebGPU) and
// turns its messages into promises and callbacks, one call for each
// operation of the worker. index.js (createEngine, the OpenAI-shaped API)
// is built on it; see README.md.
//
//   import { Tessera } from "./client.js";
//   const t = new Tessera();
//   await t.load({ url: "/models/stories260K.gguf" }, { quant: "f32" }, (p) => console.log(p));
//   const stats = await t.generate("Once upon a time", { temperature: 0.8, maxTokens: 100 },
//                                  (tok) => out.append(tok.text));
export class Tessera {
  // worker, if given, is what to run the engine in instead of a Web
  // Worker of workerURL: anything with postMessage, onmessage, onerror
  // and terminate (index.js passes Node's, from node.js).
  constructor(workerURL = new URL("worker.js", import.meta.url), worker = null) {
    this.worker = worker || new Worker(workerURL, { name: "tessera" });
    this.calls = new Map();
    this.nextID = 1;
    this.ready = new Promise((resolve, reject) => {
      this._ready = { resolve, reject };
    });
    this.ready.catch(() => {}); // callers see the failure through their own calls
    this.worker.onmessage = (ev) => this._receive(ev.data);
    this.worker.onerror = (ev) => this._fatal({ message: ev.message || "the engine's worker failed", code: "no-wasm" });
  }

  _receive(msg) {
    if (msg.event === "ready") {
      this.version = msg.version;
      this._ready.resolve(msg.version);
      return;
    }
    if (msg.event === "fatal") {
      this._fatal(msg.error);
      return;
    }
    const call = this.calls.get(msg.id);
    if (!call) return;
    if (msg.event) {
      if (call.onEvent) call.onEvent(msg.data);
      return;
    }
    this.calls.delete(msg.id);
    if (msg.ok) call.resolve(msg.value);
    else call.reject(toError(msg.error));
  }

  _fatal(error) {
    const err = toError(error);
    this.dead = err;
    this._ready.reject(err);
    for (const call of this.calls.values()) call.reject(err);
    this.calls.clear();
  }

  _call(op, args = {}, onEvent = null, transfer = []) {
    const id = this.nextID++;
    const p = new Promise((resolve, reject) => {
      if (this.dead) {
        reject(this.dead);
        return;
      }
      this.calls.set(id, { resolve, reject, onEvent });
      try {
        this.worker.postMessage({ id, op, args }, transfer);
      } catch (err) { // arguments that cannot be cloned (a function, a Symbol…)
        this.calls.delete(id);
        reject(new TesseraError(`${op}: the arguments cannot be sent to the engine: ${err.message}`, "bad-request"));
      }
    });
    p.id = id; // what abort(id) takes
    return p;
  }

  // load reads a model: source is {url}, {file: File|Blob} or {buffer:
  // ArrayBuffer} (transferred to the worker). options: {quant: "" | "int4" |
  // "f16" | "f32", kvType: "" | "f32" | "f16" | "int8", context, device:
  // "webgpu" | "cpu", cache: true, maxBatchTokens, maxSeqs}.
  // onProgress gets {phase: "download" | "verify" | "upload", done, total}.
  load(source, options = {}, onProgress = null) {
    const transfer = source && source.buffer instanceof ArrayBuffer ? [source.buffer] : [];
    return this._call("load", { source, options }, onProgress, transfer);
  }

  // inspect reads a model's header (a URL by range requests) and resolves
  // to its description and memory estimates, without loading it.
  inspect(source, options = {}) {
    return this._call("inspect", { source, options });
  }

  // generate continues input: a prompt string (with BOS), {prompt},
  // {tokens}, or a chat (the model's chat template): {messages, tools,
  // tool_choice, parallel_tool_calls, chat_template_kwargs,
  // reasoning_effort}, with OpenAI's shapes (assistant messages with
  // tool_calls and reasoning_content, tool messages with tool_call_id).
  // options: {temperature, topK, topP, minP, repeatPenalty, maxTokens,
  // seed, stop: string | string[], constraint: JSON of response_format, grammar, regex…,
  // adapters: [{name, scale}] (loadAdapter's), callPrefix: what ids of
  // calls the model gave none are made from}; onToken gets {text, id,
  // index} and, for a chat, events: the reply as the model's format reads
  // it, [{kind: "reasoning" | "text", text} | {kind: "call", call, name,
  // id} | {kind: "args", call, text}] (a call's name as soon as it is
  // known, its arguments' pieces as they come; id -1 for the last events).
  // Resolves to stats: {promptTokens, promptIds, generated, ttftMs,
  // totalMs, decodeTps, prefillTps, stopped: "max" | "eos" | "stop" |
  // "length" | "complete" | "abort", finishReason: "stop" | "length" |
  // "tool_calls" | "abort", seed} and, for a chat, {reasoning, content,
  // toolCalls: [{id, type: "function", function: {name, arguments}}]}.
  // The promise's id is what abort(id) takes. Several may run at once.
  generate(input, options = {}, onToken = null) {
    return this._call("generate", { input, options }, onToken);
  }

  // tokenize resolves to {ids, text}: a string's ids (options: bos = true,
  // special = false), or the prompt ids of {messages} or {prompt}.
  tokenize(input, options = {}) {
    return this._call("tokenize", { input, options });
  }

  detokenize(ids) {
    return this._call("detokenize", { ids: Array.from(ids) });
  }

  // embed resolves to {data: number[][], promptTokens}: one L2-normalised
  // vector per input (a string, strings, token ids or arrays of them) of
  // an embedding model; options: {dimensions}.
  embed(input, options = {}) {
    return this._call("embed", { input, options });
  }

  // loadAdapter reads a LoRA adapter of the loaded model (a GGUF LoRA, as
  // llama.cpp's convert_lora_to_gguf writes): source is {url}, {file} or
  // {buffer} (transferred); options: {scale: 1, cache: true}. Resolves to
  // its description {name, source, format, rank, targets, scale, running,
  // waiting, unloading}. generate's options.adapters, [{name, scale}],
  // then applies it.
  loadAdapter(name, source, options = {}) {
    const transfer = source && source.buffer instanceof ArrayBuffer ? [source.buffer] : [];
    return this._call("loadAdapter", { name, source, options }, null, transfer);
  }

  // unloadAdapter frees an adapter once the generations using it end.
  unloadAdapter(name) {
    return this._call("unloadAdapter", { name });
  }

  // abort stops generation id, or with none every generation and a load;
  // resolves to whether one ran.
  abort(id) {
    return this._call("abort", id ? { target: id } : {});
  }

  unload() {
    return this._call("unload");
  }

  // info resolves to {version, webgpu, adapter, path, model, adapters, wasmMemory, error, code}
  // (adapter is the WebGPU adapter; adapters the LoRA adapters).
  info() {
    return this._call("info");
  }

  cached() {
    return this._call("cached");
  }

  clearCache() {
    return this._call("clearCache");
  }

  terminate() {
    this.worker.terminate();
    this._fatal({ message: "the engine was unloaded", code: "aborted" });
  }
}

// TesseraError is every failure of the engine: code names its kind
// ("no-webgpu", "out-of-memory", "adapter-limits", "bad-model",
// "bad-request", "network", "storage", "aborted", "no-model", "bad-source",
// "integrity", "no-wasm" or "error"); name is "AbortError" for "aborted",
// as fetch's. A bad request's param names the field at fault, as the
// HTTP server's error body does.
export class TesseraError extends Error {
  constructor(message, code = "error", param = undefined) {
    super(message);
    this.code = code;
    this.name = code === "aborted" ? "AbortError" : "TesseraError";
    if (param !== undefined) this.param = param;
  }
}

export function toError(e) {
  if (e instanceof TesseraError) return e;
  return new TesseraError(e && e.message ? e.message : String(e), (e && e.code) || "error", e && e.param);
}
