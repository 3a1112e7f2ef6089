// node-worker.js is a Node worker thread that runs worker.js, the
// engine's Web Worker script, unchanged: it gives it what a Web Worker
// has (self, importScripts, postMessage and onmessage), navigator.gpu
// from the `webgpu` package (Dawn) where it is installed, and the wasm
// read from its file. A source {path} (a model file) becomes a Blob that
// reads the file lazily.
import { parentPort, workerData } from "node:worker_threads";
import { readFileSync, openAsBlob } from "node:fs";
import { basename } from "node:path";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

const here = new URL(workerData.url);

if (!globalThis.navigator) globalThis.navigator = {}; // Node 20 has none
try {
  const { create, globals } = await import("webgpu");
  Object.assign(globalThis, globals);
  globalThis.navigator.gpu = create([]);
} catch {
  // No webgpu package: the engine says there is no WebGPU, and device
  // "auto" (Node's default) runs on the CPU backend.
}

globalThis.self = globalThis;
globalThis.location = { href: here.href };
globalThis.importScripts = (...names) => {
  for (const name of names) {
    const file = fileURLToPath(new URL(name, here));
    vm.runInThisContext(readFileSync(file, "utf8"), { filename: file });
  }
};
globalThis.tesseraLoadWasm = (url, imports) => WebAssembly.instantiate(readFileSync(fileURLToPath(url)), imports);
globalThis.postMessage = (msg) => parentPort.postMessage(msg);

await import(here.href); // worker.js: sets self.onmessage

parentPort.on("message", async (data) => {
  const src = data && data.args && data.args.source;
  if (src && typeof src.path === "string") {
    try {
      data.args.source = { file: await openAsBlob(src.path), name: basename(src.path) };
    } catch (err) {
      parentPort.postMessage({ id: data.id, ok: false, error: { message: `cannot open ${src.path}: ${err.message}`, code: "bad-source" } });
      return;
    }
  }
  globalThis.onmessage({ data });
});
