// Tessera in the browser: a language model on WebGPU, in a Worker, with an
// OpenAI-shaped API. An ES module without dependencies: import it as is.
//
//   import { createEngine } from "tessera-web";
//   const engine = await createEngine({ model: "https://…/model.gguf" });
//   const reply = await engine.chat.completions.create({ messages: [{ role: "user", content: "Hi" }] });
//   console.log(reply.choices[0].message.content);
//
// Each engine is a dedicated Worker running its own copy of the wasm: a
// page may hold several. See README.md and index.d.ts.
import { Tessera, TesseraError, toError } from "./client.js";

export { Tessera, TesseraError };

const workerURL = new URL("./worker.js", import.meta.url);

let nextEngine = 1;

function abortError(signal) {
  const reason = signal && signal.reason;
  const msg = reason && reason.message ? reason.message : "aborted";
  return new TesseraError(msg, "aborted");
}

// createEngine starts a worker, loads options.model (a URL or string, a
// File or Blob, or an ArrayBuffer) and resolves to the engine.
export async function createEngine(options = {}) {
  const { model, quant = "", kvType = "", context = 0, device = "webgpu", cache = true, maxStorageBinding = 0, onProgress = null, signal = null } = options;
  if (signal && signal.aborted) throw abortError(signal);
  if (model != null && device !== "cpu" && !(globalThis.navigator && navigator.gpu)) {
    throw new TesseraError("WebGPU is not available in this browser (navigator.gpu is missing); pass device: \"cpu\" for the slow CPU backend", "no-webgpu");
  }
  let url = options.worker ? new URL(options.worker, location.href) : new URL(workerURL);
  if (options.wasm) url.searchParams.set("wasm", new URL(options.wasm, location.href).href);
  const client = new Tessera(url);
  const onAbort = () => client.abort();
  signal && signal.addEventListener("abort", onAbort, { once: true });
  try {
    await client.ready;
    const info = model == null ? null : await client.load(toSource(model), { quant, kvType, context, device, cache, maxStorageBinding }, onProgress);
    if (signal && signal.aborted) throw abortError(signal);
    return new Engine(client, info);
  } catch (err) {
    client.terminate();
    throw signal && signal.aborted ? abortError(signal) : toError(err);
  } finally {
    signal && signal.removeEventListener("abort", onAbort);
  }
}

// toSource turns what createEngine and load take into the worker's source.
function toSource(model) {
  if (typeof model === "string" || model instanceof URL) return { url: new URL(model, location.href).href };
  if (typeof Blob !== "undefined" && model instanceof Blob) return { file: model };
  if (model instanceof ArrayBuffer) return { buffer: model };
  // The parts of a split model (NAME-00001-of-0000N.gguf…), in any order.
  if ((Array.isArray(model) || (typeof FileList !== "undefined" && model instanceof FileList)) &&
      model.length > 0 && Array.from(model).every((f) => f instanceof Blob)) {
    return model.length === 1 ? { file: model[0] } : { files: Array.from(model) };
  }
  if (model && (model.url || model.file || model.files || model.buffer)) return model;
  throw new TesseraError("model must be a URL, a File or Blob (or the Files of a split model), or an ArrayBuffer", "bad-source");
}

// inspect reads a model's header, and what loading it would take, without
// loading it (a URL by range requests): for a memory estimate up front.
export async function inspect(model, options = {}) {
  const client = new Tessera(new URL(workerURL));
  try {
    await client.ready;
    return await client.inspect(toSource(model), options);
  } finally {
    client.terminate();
  }
}

// sampling maps OpenAI's parameter names onto the engine's.
function sampling(p) {
  const o = {
    temperature: p.temperature ?? 1,
    topP: p.top_p ?? 1,
    topK: p.top_k ?? 0,
    minP: p.min_p ?? 0,
    maxTokens: p.max_completion_tokens ?? p.max_tokens ?? 256,
  };
  if (o.topP >= 1) o.topP = 0; // 1 and 0 both mean off; the engine wants 0
  if (p.seed != null) o.seed = p.seed;
  if (p.stop != null) o.stop = Array.isArray(p.stop) ? p.stop : [p.stop];
  if (p.repetition_penalty != null) o.repeatPenalty = p.repetition_penalty;
  if (p.ignore_eos) o.ignoreEOS = true;
  // LoRA adapters (Engine.loadAdapter's), as tessera serve's "lora" field.
  if (p.lora != null) o.adapters = p.lora;
  // Structured output goes to the engine as the JSON of its fields, which
  // it reads as the HTTP server does (runtime/grammar.Fields).
  const constraint = {};
  for (const k of constraintFields) if (p[k] != null) constraint[k] = p[k];
  if (Object.keys(constraint).length) o.constraint = JSON.stringify(constraint);
  return o;
}

const constraintFields = ["response_format", "grammar", "regex", "guided_json", "guided_grammar", "guided_regex"];

function finishReason(stats) {
  return stats.finishReason === "abort" ? "abort" : stats.finishReason;
}

function usage(stats) {
  return { prompt_tokens: stats.promptTokens, completion_tokens: stats.generated, total_tokens: stats.promptTokens + stats.generated };
}

// A Queue is an async iterator fed by callbacks.
class Queue {
  constructor() {
    this.items = [];
    this.waiting = null;
    this.done = false;
    this.error = null;
  }
  push(v) {
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w.resolve({ value: v, done: false });
    } else this.items.push(v);
  }
  end(err) {
    this.done = true;
    this.error = err || null;
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      if (this.error) w.reject(this.error);
      else w.resolve({ value: undefined, done: true });
    }
  }
  next() {
    if (this.items.length) return Promise.resolve({ value: this.items.shift(), done: false });
    if (this.done) {
      if (this.error) {
        const e = this.error;
        this.error = null; // thrown once; after that the iterator is done
        return Promise.reject(e);
      }
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => (this.waiting = { resolve, reject }));
  }
}

// A Stream is what create({stream: true}) returns: an async iterator of
// chunks, with abort() and, once done, the engine's stats.
class Stream {
  constructor(queue, stop) {
    this._queue = queue;
    this._stop = stop;
    this.stats = null;
  }
  [Symbol.asyncIterator]() {
    return {
      next: () => this._queue.next(),
      return: () => {
        this._stop(); // a consumer that breaks out stops the generation
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
  abort() {
    this._stop();
  }
}

class Engine {
  constructor(client, info) {
    this.id = nextEngine++;
    this.client = client;
    this.model = info;
    this._n = 0;
    this._tag = randomTag(); // completion ids (and so call ids) unique beyond this page
    const engine = this;
    this.chat = { completions: { create: (p) => engine._create("chat", p) } };
    this.completions = { create: (p) => engine._create("text", p) };
    this.embeddings = { create: (p) => engine._embed(p) };
  }

  // load replaces the model (a URL, File, Blob or ArrayBuffer).
  async load(model, options = {}) {
    const { signal = null, onProgress = null, ...rest } = options;
    if (signal && signal.aborted) throw abortError(signal);
    const onAbort = () => this.client.abort();
    signal && signal.addEventListener("abort", onAbort, { once: true });
    try {
      this.model = await this.client.load(toSource(model), rest, onProgress);
      return this.model;
    } catch (err) {
      throw signal && signal.aborted ? abortError(signal) : toError(err);
    } finally {
      signal && signal.removeEventListener("abort", onAbort);
    }
  }

  // tokenize resolves to the ids of text (options: bos, special), or of
  // the prompt that {messages} or {prompt} make.
  async tokenize(input, options = {}) {
    return (await this.client.tokenize(input, options)).ids;
  }

  detokenize(ids) {
    return this.client.detokenize(ids);
  }

  info() {
    return this.client.info();
  }

  // inspect reads a model's header without loading it (see inspect below).
  inspect(model, options = {}) {
    return this.client.inspect(toSource(model), options);
  }

  cached() {
    return this.client.cached();
  }

  clearCache() {
    return this.client.clearCache();
  }

  // loadAdapter reads a LoRA adapter of the model (a URL, File, Blob or
  // ArrayBuffer of a GGUF LoRA) under name; a request's lora: [{name,
  // scale}] applies it. options: {scale: 1, cache: true}.
  loadAdapter(name, adapter, options = {}) {
    return this.client.loadAdapter(name, toSource(adapter), options);
  }

  // unloadAdapter frees an adapter once the requests using it end.
  unloadAdapter(name) {
    return this.client.unloadAdapter(name);
  }

  // unload frees the model and ends the worker (and its GPU device).
  async unload() {
    try {
      await this.client.unload();
    } catch {}
    this.client.terminate();
    this.model = null;
  }

  // _embed is embeddings.create: OpenAI's request and response, with an
  // embedding model loaded (encoding_format "float" or "base64", the
  // latter little-endian float32s as OpenAI sends them).
  async _embed(p = {}) {
    const format = p.encoding_format || "float";
    if (format !== "float" && format !== "base64") {
      throw new TesseraError(`encoding_format must be float or base64, not ${format}`, "bad-request");
    }
    let res;
    try {
      res = await this.client.embed(p.input, p.dimensions ? { dimensions: p.dimensions } : {});
    } catch (err) {
      throw toError(err);
    }
    const encode = (v) => {
      if (format === "float") return v;
      const bytes = new Uint8Array(Float32Array.from(v).buffer);
      let bin = "";
      for (let i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i]);
      return btoa(bin);
    };
    return {
      object: "list",
      data: res.data.map((v, index) => ({ object: "embedding", index, embedding: encode(v) })),
      model: p.model || (this.model && this.model.name) || "tessera",
      usage: { prompt_tokens: res.promptTokens, total_tokens: res.promptTokens },
    };
  }

  // _create is chat.completions.create and completions.create. A chat's
  // reply comes split as the engine reads it (the model's own format):
  // reasoning_content, content and tool_calls, streamed as the HTTP
  // server's Chat Completions streams them.
  _create(kind, p = {}) {
    const chat = kind === "chat";
    const id = `${chat ? "chatcmpl" : "cmpl"}-${this._tag}-${++this._n}`;
    let input, options;
    try {
      if (p === null || typeof p !== "object") throw new TypeError("create takes a request object");
      input = chat ? chatInput(p) : typeof p.prompt === "string" ? { prompt: p.prompt } : Array.isArray(p.prompt) ? { tokens: p.prompt } : { prompt: "" };
      // Calls the model gives no id get one made from this (the server's
      // call-<completion>-<choice> ids), by the model's format's rule.
      options = { ...sampling(p), callPrefix: `call-${id}-0` };
    } catch (err) {
      return Promise.reject(err instanceof TesseraError ? err : new TesseraError(err.message || String(err), "bad-request"));
    }
    const created = Math.floor(Date.now() / 1000);
    const model = p.model || (this.model && this.model.name) || "tessera";
    const signal = p.signal || null;
    if (signal && signal.aborted) {
      const e = abortError(signal);
      return Promise.reject(e);
    }
    const ids = [];
    let text = "";
    const queue = p.stream ? new Queue() : null;
    const object = chat ? "chat.completion" : "text_completion";
    const chunkObject = chat ? "chat.completion.chunk" : "text_completion";
    const chunk = (choice, extra) => ({ id, object: chunkObject, created, model, choices: [{ index: 0, ...choice }], ...extra });
    if (queue && chat) queue.push(chunk({ delta: { role: "assistant", content: "" }, finish_reason: null }));
    const call = this.client.generate(input, options, (tok) => {
      if (tok.id >= 0) ids.push(tok.id);
      text += tok.text;
      if (!queue) return;
      const ext = { tessera: { token_id: tok.id } };
      if (!chat) {
        if (tok.text || tok.id >= 0) queue.push(chunk({ text: tok.text, finish_reason: null }, ext));
        return;
      }
      // A delta per reply event, the token's id with the first; a token
      // that completes none (a marker, or what may be the start of one)
      // still has its chunk, with empty content.
      const deltas = tok.events.map(delta);
      if (!deltas.length && tok.id >= 0) deltas.push({ content: "" });
      deltas.forEach((d, i) => queue.push(chunk({ delta: d, finish_reason: null }, i === 0 ? ext : undefined)));
    });
    let aborted = false;
    const stop = () => {
      aborted = true;
      this.client.abort(call.id).catch(() => {});
    };
    signal && signal.addEventListener("abort", stop, { once: true });
    const done = call.then((stats) => {
      signal && signal.removeEventListener("abort", stop);
      if (stats.finishReason === "abort" || aborted) {
        const e = signal && signal.aborted ? abortError(signal) : new TesseraError("the generation was aborted", "aborted");
        e.stats = stats; // what had been generated when it stopped
        e.text = text;
        throw e;
      }
      return stats;
    }, (err) => {
      signal && signal.removeEventListener("abort", stop);
      throw toError(err);
    });
    const ext = (stats) => ({ tessera: { token_ids: ids, prompt_ids: stats.promptIds, stopped: stats.stopped, ttft_ms: stats.ttftMs, total_ms: stats.totalMs, decode_tps: stats.decodeTps, prefill_tps: stats.prefillTps, seed: stats.seed } });
    if (!queue) {
      return done.then((stats) => ({
        id, object, created, model,
        choices: [chat
          ? { index: 0, message: message(stats), finish_reason: finishReason(stats), logprobs: null }
          : { index: 0, text, finish_reason: finishReason(stats), logprobs: null }],
        usage: usage(stats),
        ...ext(stats),
      }));
    }
    const stream = new Stream(queue, stop);
    done.then((stats) => {
      stream.stats = stats;
      queue.push(chunk(chat ? { delta: {}, finish_reason: finishReason(stats) } : { text: "", finish_reason: finishReason(stats) },
        { usage: usage(stats), ...ext(stats) }));
      queue.end();
    }, (err) => queue.end(err));
    return Promise.resolve(stream);
  }
}

// chatFields are the fields of a chat request, besides messages, that go
// to the engine, which reads and checks them as the HTTP server does.
const chatFields = ["tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "reasoning_effort"];

function chatInput(p) {
  const input = { messages: p.messages ?? null }; // none is a bad request, not a prompt
  for (const k of chatFields) if (p[k] !== undefined) input[k] = p[k];
  return input;
}

// delta is a reply event (generate's onToken events) as a chunk's delta,
// as the server's streamChat writes it: a call's first delta names it
// (index, id, type, function.name, empty arguments), the rest add to its
// arguments.
function delta(e) {
  switch (e.kind) {
    case "reasoning":
      return { reasoning_content: e.text };
    case "call":
      return { tool_calls: [{ index: e.call, id: e.id, type: "function", function: { name: e.name, arguments: "" } }] };
    case "args":
      return { tool_calls: [{ index: e.call, function: { arguments: e.text } }] };
    default:
      return { content: e.text };
  }
}

// message is a chat reply's message: its content, and its reasoning and
// tool calls where it has them.
function message(stats) {
  const m = { role: "assistant", content: stats.content };
  if (stats.reasoning) m.reasoning_content = stats.reasoning;
  if (stats.toolCalls.length) m.tool_calls = stats.toolCalls;
  return m;
}

function randomTag() {
  return Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, "0")).join("");
}

// cached lists the models kept in this origin's storage; clearCache
// removes them. Both start a short-lived worker.
export async function cached() {
  const c = new Tessera(new URL(workerURL));
  try {
    await c.ready;
    return await c.cached();
  } finally {
    c.terminate();
  }
}

export async function clearCache() {
  const c = new Tessera(new URL(workerURL));
  try {
    await c.ready;
    return await c.clearCache();
  } finally {
    c.terminate();
  }
}
