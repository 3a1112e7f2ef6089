// worker.js runs Tessera's engine (Go compiled to wasm, see wasm/browser)
// in a dedicated Web Worker, so that loading and generating never block the
// page; each worker is one engine, so a page may run several. It speaks a
// small message protocol with client.js (which index.js builds on):
//
//   page → worker  {id, op, args}           op: load, inspect, generate, tokenize,
//                                            detokenize, embed, loadAdapter,
//                                            unloadAdapter, abort, unload, info,
//                                            cached, clearCache
//                  {op: "abort", args: {target}}  stops call `target` (a generate)
//   worker → page  {id, event, data}        event: "progress" | "token"
//                  {id, ok: true, value}    the call finished
//                  {id, ok: false, error: {message, code}}
//                  {event: "ready", version} | {event: "fatal", error}
"use strict";

importScripts("wasm_exec.js");

// tesseraReplay encodes and submits one step of the engine's GPU commands,
// which runtime/gpu/webgpu (recorder_js.go) lists as numbers so that a step
// crosses from wasm into JavaScript once, not three times a dispatch. objs
// is the device's registry of buffers, bind groups and pipelines; cmds
// holds n numbers: 0 begin a compute pass; 1 pipeline; 2 bind group;
// 3 x y z dispatch; 4 src srcOffset dst dstOffset size copy; 5 end the pass.
globalThis.tesseraReplay = function (device, queue, objs, cmds, n) {
  const enc = device.createCommandEncoder();
  let pass = null;
  for (let i = 0; i < n;) {
    switch (cmds[i]) {
      case 0: pass = enc.beginComputePass(); i += 1; break;
      case 1: pass.setPipeline(objs[cmds[i + 1]]); i += 2; break;
      case 2: pass.setBindGroup(0, objs[cmds[i + 1]]); i += 2; break;
      case 3: pass.dispatchWorkgroups(cmds[i + 1], cmds[i + 2], cmds[i + 3]); i += 4; break;
      case 4: enc.copyBufferToBuffer(objs[cmds[i + 1]], cmds[i + 2], objs[cmds[i + 3]], cmds[i + 4], cmds[i + 5]); i += 6; break;
      case 5: pass.end(); pass = null; i += 1; break;
      default: throw new Error(`tesseraReplay: unknown command ${cmds[i]} at ${i}`);
    }
  }
  queue.submit([enc.finish()]);
};

// The wasm next to this script, or where the page said (?wasm=URL).
const wasmURL = new URL(new URL(self.location.href).searchParams.get("wasm") || "tessera.wasm", self.location.href);

const ready = new Promise((resolve) => {
  // wasm/browser calls this once globalThis.tessera exists.
  globalThis.tesseraReady = resolve;
});

async function start() {
  const go = new Go();
  const url = wasmURL;
  let result;
  try {
    // Node's bootstrap (node-worker.js) reads the file instead of fetching it.
    result = globalThis.tesseraLoadWasm ? await globalThis.tesseraLoadWasm(url, go.importObject)
      : await WebAssembly.instantiateStreaming(fetch(url), go.importObject);
  } catch (err) {
    if (globalThis.tesseraLoadWasm) throw err;
    // A server that sends the wasm without application/wasm: compile from bytes.
    const response = await fetch(url);
    if (!response.ok) {
      throw new Error(`cannot fetch ${url.pathname}: HTTP ${response.status} (build it with 'make web')`);
    }
    result = await WebAssembly.instantiate(await response.arrayBuffer(), go.importObject);
  }
  // Kept where Go's js runtime helpers and tessera.info() look for memory.
  globalThis.wasm = result;
  go.run(result.instance).then(() => post({ event: "fatal", error: { message: "the engine exited", code: "error" } }));
  await ready;
  return globalThis.tessera;
}

const started = start();
started.then(
  (t) => {
    console.info(`tessera: engine ${t.version} ready`);
    post({ event: "ready", version: t.version });
  },
  (err) => post({ event: "fatal", error: { message: String(err && err.message || err), code: "no-wasm" } }),
);

function post(msg) {
  self.postMessage(msg);
}

self.onmessage = async (ev) => {
  const { id, op, args = {} } = ev.data;
  try {
    const t = await started;
    let value;
    switch (op) {
      case "load":
        value = await t.load(args.source, args.options || {}, (p) => post({ id, event: "progress", data: p }));
        break;
      case "inspect":
        value = await t.inspect(args.source, args.options || {});
        break;
      case "generate":
        // The call's id names the generation, so that abort can stop it alone.
        value = await t.generate(args.input ?? args.prompt ?? "", { ...(args.options || {}), id },
          (tok) => post({ id, event: "token", data: tok }));
        break;
      case "tokenize":
        value = await t.tokenize(args.input ?? "", args.options || {});
        break;
      case "detokenize":
        value = await t.detokenize(args.ids || []);
        break;
      case "embed":
        value = await t.embed(args.input, args.options || {});
        break;
      case "loadAdapter":
        value = await t.loadAdapter(args.name, args.source, args.options || {});
        break;
      case "unloadAdapter":
        value = await t.unloadAdapter(args.name);
        break;
      case "abort":
        value = args.target ? t.abort(args.target) : t.abort();
        break;
      case "unload":
      case "info":
      case "cached":
      case "clearCache":
        value = await t[op]();
        break;
      default:
        throw Object.assign(new Error(`unknown operation ${op}`), { code: "error" });
    }
    post({ id, ok: true, value });
  } catch (err) {
    post({ id, ok: false, error: { message: String(err && err.message || err), code: (err && err.code) || "error", param: err && err.param } });
  }
};
