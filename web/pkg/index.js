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

// Outside a browser (Node, Deno, Bun) the engine runs in a worker thread
// (node.js); the import is computed so that bundlers for pages leave it.
const inNode = typeof process !== "undefined" && !!(process.versions && process.versions.node) &&
  typeof window === "undefined" && typeof importScripts === "undefined";
let nodeHost = null;

function host() {
  if (!inNode) return null;
  nodeHost ??= import(/* webpackIgnore: true */ /* @vite-ignore */ new URL("./node.js", import.meta.url).href);
  return nodeHost;
}

// newClient starts an engine's worker: a Web Worker in a page, a worker
// thread in Node.
async function newClient(url) {
  const h = await host();
  return h ? new Tessera(url, h.nodeWorker(url)) : new Tessera(url);
}

// here is what relative URLs resolve against: the page, or in Node the
// working directory.
async function here() {
  if (globalThis.location && globalThis.location.href) return globalThis.location.href;
  const h = await host();
  return h ? h.base() : undefined;
}

function abortError(signal) {
  const reason = signal && signal.reason;
  const msg = reason && reason.message ? reason.message : "aborted";
  return new TesseraError(msg, "aborted");
}

// createEngine starts a worker, loads options.model (a URL or string, a
// File or Blob, or an ArrayBuffer) and resolves to the engine.
// In Node there is no OPFS to cache in, and a machine may have no
// adapter: device "auto" takes WebGPU where Dawn finds one, else the CPU.
export async function createEngine(options = {}) {
  if (options === null || typeof options !== "object") throw new TesseraError("createEngine takes an options object", "bad-request");
  const { model, quant = "", kvType = "", context = 0, device = inNode ? "auto" : "webgpu", cache = !inNode, maxStorageBinding = 0,
    draft = "", sha256 = "", selfCheck = true, kernelFault = "", maxBatchTokens = 0, maxSeqs = 0, projector = null, onProgress = null, signal = null } = options;
  checkOptions({ quant, kvType, context, device, cache, maxStorageBinding, draft, sha256, selfCheck, kernelFault, maxBatchTokens, maxSeqs, onProgress, signal });
  if (signal && signal.aborted) throw abortError(signal);
  if (model != null && device === "webgpu" && !inNode && !(globalThis.navigator && navigator.gpu)) {
    throw new TesseraError("WebGPU is not available in this browser (navigator.gpu is missing); pass device: \"cpu\" for the slow CPU backend", "no-webgpu");
  }
  const base = await here();
  let url = options.worker ? new URL(options.worker, base) : new URL(workerURL);
  if (options.wasm) url.searchParams.set("wasm", new URL(options.wasm, base).href);
  const client = await newClient(url);
  const onAbort = () => client.abort();
  signal && signal.addEventListener("abort", onAbort, { once: true });
  try {
    await client.ready;
    const info = model == null ? null : await client.load(await toSource(model), { quant, kvType, context, device, cache, maxStorageBinding, draft, sha256, selfCheck, kernelFault, maxBatchTokens, maxSeqs,
      projector: await toProjector(projector) }, onProgress);
    if (signal && signal.aborted) throw abortError(signal);
    return new Engine(client, info);
  } catch (err) {
    client.terminate();
    throw signal && signal.aborted ? abortError(signal) : toError(err);
  } finally {
    signal && signal.removeEventListener("abort", onAbort);
  }
}

// checkOptions refuses a load option of the wrong kind, naming it; the
// engine checks the values (a quant it does not know, a bad hash).
function checkOptions(o) {
  const want = { quant: "string", kvType: "string", device: "string", draft: "string", context: "number",
    maxStorageBinding: "number", maxBatchTokens: "number", maxSeqs: "number", cache: "boolean", selfCheck: "boolean", kernelFault: "string", onProgress: "function" };
  for (const [k, type] of Object.entries(want)) {
    if (o[k] != null && typeof o[k] !== type) throw new TesseraError(`${k} must be a ${type}, not ${typeof o[k]}`, "bad-request", k);
  }
  if (o.signal != null && typeof o.signal.addEventListener !== "function") throw new TesseraError("signal must be an AbortSignal", "bad-request", "signal");
  if (o.sha256 != null && typeof o.sha256 !== "string" && !Array.isArray(o.sha256)) {
    throw new TesseraError("sha256 must be a hex string, or a list of them for a split model's parts", "bad-request", "sha256");
  }
}

// toSource turns what createEngine and load take into the worker's
// source. In Node a string that is no URL is a file's path.
async function toSource(model) {
  if (inNode && (typeof model === "string" || model instanceof URL) && (String(model).startsWith("file:") || !/^[a-z][a-z0-9+.-]*:/i.test(String(model)))) {
    return { path: (await host()).toPath(model) };
  }
  if (typeof model === "string" || model instanceof URL) return { url: new URL(model, await here()).href };
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

// toProjector turns options.projector (a vision projector: an mmproj
// GGUF) into what the worker's load takes: a URL, {url, sha256, cache},
// {file} or {buffer}; in Node a path's bytes. null for none.
async function toProjector(p) {
  if (p == null) return null;
  if (inNode && (typeof p === "string" || p instanceof URL) && (String(p).startsWith("file:") || !/^[a-z][a-z0-9+.-]*:/i.test(String(p)))) {
    const { readFile } = await import("node:fs/promises");
    const b = await readFile((await host()).toPath(p));
    return { buffer: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) };
  }
  if (typeof p === "string" || p instanceof URL) return { url: new URL(p, await here()).href };
  if (typeof Blob !== "undefined" && p instanceof Blob) return { file: p };
  if (p instanceof ArrayBuffer) return { buffer: p };
  if (typeof p === "object" && typeof p.url === "string") return { ...p, url: new URL(p.url, await here()).href };
  if (typeof p === "object" && (p.file || p.buffer)) return p;
  throw new TesseraError("projector must be a URL, {url, sha256}, a File or Blob, or an ArrayBuffer", "bad-request", "projector");
}

// inspect reads a model's header, and what loading it would take, without
// loading it (a URL by range requests): for a memory estimate up front.
export async function inspect(model, options = {}) {
  const client = await newClient(new URL(workerURL));
  try {
    await client.ready;
    return await client.inspect(await toSource(model), options);
  } finally {
    client.terminate();
  }
}

function finishReason(stats) {
  return stats.finishReason === "abort" ? "abort" : stats.finishReason;
}

function usage(stats) {
  const generated = (stats.choices || [stats]).reduce((n, s) => n + s.generated, 0);
  return { prompt_tokens: stats.promptTokens, completion_tokens: generated, total_tokens: stats.promptTokens + generated };
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
      checkOptions({ ...rest, onProgress, signal });
      this.model = await this.client.load(await toSource(model), { ...rest, projector: await toProjector(rest.projector) }, onProgress);
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
  async inspect(model, options = {}) {
    return this.client.inspect(await toSource(model), options);
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
  async loadAdapter(name, adapter, options = {}) {
    return this.client.loadAdapter(name, await toSource(adapter), options);
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

  // _create is chat.completions.create and completions.create. The
  // request's sampling fields go to the engine as its JSON, read there as
  // the HTTP server reads them (runtime/wire), so both take and refuse
  // the same values; a chat's reply comes split as the engine reads it
  // (the model's own format): reasoning_content, content and tool_calls,
  // streamed as the server's Chat Completions streams them, with n
  // choices and logprobs as the server gives them.
  _create(kind, p = {}) {
    const chat = kind === "chat";
    const id = `${chat ? "chatcmpl" : "cmpl"}-${this._tag}-${++this._n}`;
    let input, options;
    try {
      if (p === null || typeof p !== "object" || Array.isArray(p)) throw new TesseraError("create takes a request object", "bad-request");
      if (p.signal != null && typeof p.signal.addEventListener !== "function") throw new TesseraError("signal must be an AbortSignal", "bad-request", "signal");
      if (p.stream != null && typeof p.stream !== "boolean") throw new TesseraError("stream must be a boolean", "bad-request", "stream");
      input = chat ? chatInput(p) : completionInput(p);
      // Calls the model gives no id get one made from this (the server's
      // call-<completion>-<choice> ids), by the model's format's rule.
      options = { request: requestJSON(p), callPrefix: `call-${id}-0` };
      // Tessera's transcript: each choice's generation written down, for
      // `tessera replay` to run again natively (as the server's field).
      if (p.transcript != null) {
        if (typeof p.transcript !== "boolean") throw new TesseraError("transcript must be a boolean", "bad-request", "transcript");
        options.transcript = p.transcript;
      }
      // LoRA adapters (Engine.loadAdapter's), as tessera serve's "lora" field.
      if (p.lora != null) options.adapters = p.lora;
    } catch (err) {
      return Promise.reject(err instanceof TesseraError ? err : new TesseraError(err.message || String(err), "bad-request"));
    }
    const created = Math.floor(Date.now() / 1000);
    const model = p.model || (this.model && this.model.name) || "tessera";
    const signal = p.signal || null;
    if (signal && signal.aborted) return Promise.reject(abortError(signal));
    const logprobs = chat ? p.logprobs === true : p.logprobs != null;
    const choices = []; // per choice: its token ids, text and logprobs entries
    const choiceOf = (i) => (choices[i] ??= { ids: [], text: "", lps: [] });
    const queue = p.stream ? new Queue() : null;
    const object = chat ? "chat.completion" : "text_completion";
    const chunkObject = chat ? "chat.completion.chunk" : "text_completion";
    let fingerprint; // the engine's system_fingerprint, known once the first generation has run
    const chunk = (choice, extra) => ({ id, object: chunkObject, created, model, ...(fingerprint ? { system_fingerprint: fingerprint } : {}), choices: [choice], ...extra });
    const withTranscript = (choice, s) => (s.transcript ? { ...choice, transcript: s.transcript } : choice);
    if (queue && chat) {
      for (let i = 0; i < (Number.isInteger(p.n) && p.n > 1 ? p.n : 1); i++) {
        queue.push(chunk({ index: i, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }));
      }
    }
    const call = this.client.generate(input, options, (tok) => {
      const i = tok.choice || 0;
      const c = choiceOf(i);
      if (tok.id >= 0) c.ids.push(tok.id);
      c.text += tok.text;
      if (tok.logprobs) c.lps.push(tok.logprobs);
      if (!queue) return;
      const ext = { tessera: { token_id: tok.id } };
      if (!chat) {
        if (tok.text || tok.id >= 0) {
          const lp = logprobs ? legacyLogprobs(tok.logprobs ? [tok.logprobs] : []) : null;
          queue.push(chunk({ index: i, text: tok.text, logprobs: lp, finish_reason: null }, ext));
        }
        return;
      }
      // A delta per reply event, the token's id and logprobs with the
      // first; a token that completes none (a marker, or what may be the
      // start of one) still has its chunk, with empty content.
      const deltas = tok.events.map(delta);
      if (!deltas.length && tok.id >= 0) deltas.push({ content: "" });
      deltas.forEach((d, k) => {
        const lp = k === 0 && tok.logprobs ? { content: [tok.logprobs] } : null;
        queue.push(chunk({ index: i, delta: d, logprobs: lp, finish_reason: null }, k === 0 ? ext : undefined));
      });
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
        e.text = choiceOf(0).text;
        throw e;
      }
      return stats;
    }, (err) => {
      signal && signal.removeEventListener("abort", stop);
      throw toError(err);
    });
    const ext = (stats) => ({ tessera: { token_ids: choiceOf(0).ids, prompt_ids: stats.promptIds, stopped: stats.stopped, ttft_ms: stats.ttftMs,
      total_ms: stats.totalMs, decode_tps: stats.decodeTps, prefill_tps: stats.prefillTps, seed: stats.seed,
      draft_tokens: stats.drafted, accepted_tokens: stats.accepted } });
    const all = (stats) => stats.choices || [stats];
    if (!queue) {
      return done.then((stats) => ({
        id, object, created, model, system_fingerprint: stats.systemFingerprint,
        choices: all(stats).map((s, i) => withTranscript(chat
          ? { index: i, message: message(s), logprobs: logprobs ? { content: choiceOf(i).lps } : null, finish_reason: finishReason(s) }
          : { index: i, text: choiceOf(i).text, logprobs: logprobs ? legacyLogprobs(choiceOf(i).lps) : null, finish_reason: finishReason(s) }, s)),
        usage: usage(stats),
        ...ext(stats),
      }));
    }
    const stream = new Stream(queue, stop);
    done.then((stats) => {
      stream.stats = stats;
      fingerprint = stats.systemFingerprint;
      const last = all(stats);
      last.forEach((s, i) => {
        const extra = i === last.length - 1 ? { usage: usage(stats), ...ext(stats) } : undefined;
        queue.push(chunk(withTranscript(chat ? { index: i, delta: {}, logprobs: null, finish_reason: finishReason(s) }
          : { index: i, text: "", logprobs: null, finish_reason: finishReason(s) }, s), extra));
      });
      queue.end();
    }, (err) => queue.end(err));
    return Promise.resolve(stream);
  }
}

// requestJSON is the request's JSON less what the engine reads apart (the
// chat's own fields, the prompt) and what is no JSON (the signal).
function requestJSON(p) {
  const skip = new Set(["signal", "messages", "prompt", "lora", "transcript", ...chatFields]);
  const fields = {};
  for (const [k, v] of Object.entries(p)) if (!skip.has(k)) fields[k] = v;
  return JSON.stringify(fields);
}

// completionInput is a completion's prompt: text, or token ids.
function completionInput(p) {
  if (p.prompt == null) return { prompt: "" };
  if (typeof p.prompt === "string") return { prompt: p.prompt };
  if (Array.isArray(p.prompt) && p.prompt.every((t) => Number.isInteger(t) && t >= 0)) return { tokens: p.prompt };
  throw new TesseraError("prompt must be a string or an array of token ids", "bad-request", "prompt");
}

// legacyLogprobs lays out chat-shaped logprobs entries as the completions
// API's parallel arrays, as the server does.
function legacyLogprobs(entries) {
  const out = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let offset = 0;
  for (const e of entries) {
    out.tokens.push(e.token);
    out.token_logprobs.push(e.logprob);
    out.top_logprobs.push(Object.fromEntries(e.top_logprobs.map((a) => [a.token, a.logprob])));
    out.text_offset.push(offset);
    offset += e.bytes.length;
  }
  return out;
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
  const c = await newClient(new URL(workerURL));
  try {
    await c.ready;
    return await c.cached();
  } finally {
    c.terminate();
  }
}

export async function clearCache() {
  const c = await newClient(new URL(workerURL));
  try {
    await c.ready;
    return await c.clearCache();
  } finally {
    c.terminate();
  }
}
