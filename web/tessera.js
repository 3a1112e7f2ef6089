// tessera.js is the page's side of Tessera in the browser: a small client
// that starts worker.js (the engine, Go compiled to wasm, on WebGPU) and
// turns its messages into promises and callbacks. See README.md for the API.
//
//   import { Tessera } from "./tessera.js";
//   const t = new Tessera();
//   await t.load({ url: "/models/stories260K.gguf" }, { quant: "f32" }, (p) => console.log(p));
//   const stats = await t.generate("Once upon a time", { temperature: 0.8, maxTokens: 100 },
//                                  (tok) => out.append(tok.text));
export class Tessera {
  constructor(workerURL = new URL("worker.js", import.meta.url)) {
    this.worker = new Worker(workerURL);
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
    this._ready.reject(err);
    for (const call of this.calls.values()) call.reject(err);
    this.calls.clear();
  }

  _call(op, args = {}, onEvent = null, transfer = []) {
    const id = this.nextID++;
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject, onEvent });
      this.worker.postMessage({ id, op, args }, transfer);
    });
  }

  // load reads a model: source is {url}, {file: File|Blob} or {buffer:
  // ArrayBuffer} (transferred to the worker). options: {quant: "" | "int4" |
  // "f16" | "f32", context, device: "webgpu" | "cpu", cache: true}.
  // onProgress gets {phase: "download" | "verify" | "upload", done, total}.
  load(source, options = {}, onProgress = null) {
    const transfer = source && source.buffer instanceof ArrayBuffer ? [source.buffer] : [];
    return this._call("load", { source, options }, onProgress, transfer);
  }

  // generate continues prompt. options: {temperature, topK, topP, minP,
  // repeatPenalty, maxTokens, seed}; onToken gets {text, id, index}.
  // Resolves to stats: {promptTokens, generated, ttftMs, totalMs, decodeTps,
  // prefillTps, stopped: "max" | "eos" | "length" | "abort", seed}.
  generate(prompt, options = {}, onToken = null) {
    return this._call("generate", { prompt, options }, onToken);
  }

  // abort stops the running generation or load; resolves to whether one ran.
  abort() {
    return this._call("abort");
  }

  unload() {
    return this._call("unload");
  }

  // info resolves to {version, webgpu, adapter, path, model, wasmMemory, error, code}.
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
    this._fatal({ message: "terminated", code: "aborted" });
  }
}

function toError(e) {
  const err = new Error(e && e.message ? e.message : String(e));
  err.code = (e && e.code) || "error";
  return err;
}
