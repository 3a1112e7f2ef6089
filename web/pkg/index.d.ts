// Types of tessera-web: a language model on WebGPU in a page (a Worker) or in
// Node (a worker thread), with an OpenAI-shaped API. See README.md.

export type ErrorCode =
  | "no-webgpu" | "out-of-memory" | "adapter-limits" | "bad-model" | "bad-request"
  | "network" | "storage" | "aborted" | "no-model" | "bad-source" | "integrity" | "no-wasm" | "error";

/** Every failure of the engine; `name` is "AbortError" when `code` is "aborted". */
export class TesseraError extends Error {
  constructor(message: string, code?: ErrorCode, param?: string);
  readonly code: ErrorCode;
  /** For "bad-request": the request field at fault, as Tessera's HTTP server names it in its error body. */
  readonly param?: string;
}

/**
 * A URL, a file, or the files of a model split by gguf-split (`NAME-00001-of-0000N.gguf`…, in any order).
 * In Node, a string that is no URL (or a file: URL) is a file's path, read as needed, never whole into memory.
 */
export type ModelSource = string | URL | File | Blob | ArrayBuffer | Array<File | Blob> | FileList;

export interface Progress {
  /** "projector": the vision projector's download (options.projector). */
  phase: "download" | "verify" | "upload" | "projector";
  done: number;
  /** -1 for a download of unknown size. */
  total: number;
}

export interface EngineOptions {
  /** The GGUF model: a URL (downloaded once into the origin's storage), a File or Blob, or an ArrayBuffer. */
  model?: ModelSource;
  /** Weight storage on the GPU; "" (default) is int4 for models over 32 MiB of f32 weights, else f32. */
  quant?: "" | "int4" | "f16" | "f32";
  /** Tokens of context (KV cache); default the model's, up to 4096. */
  context?: number;
  /** How the KV cache stores keys and values: "f32" (default), "f16" (half the bytes) or "int8" (a scale per token and kv head: about a quarter). */
  kvType?: "" | "f32" | "f16" | "int8";
  /**
   * "webgpu" (the default in pages), "cpu" (the Go reference backend: slow, needs no GPU), or "auto" (the default in
   * Node: WebGPU where the `webgpu` package finds an adapter, else the CPU).
   */
  device?: "webgpu" | "cpu" | "auto";
  /** Keep downloads in the origin private file system (default true in pages; Node has none). */
  cache?: boolean;
  /**
   * The model file's SHA-256 (hex) as its source publishes it (the Hugging Face Hub lists it), or one per part of a
   * split model: a download is checked against it before it is kept, and a cached copy before it is reused. A
   * download that differs rejects with code "integrity" (the copy is deleted); a damaged cached copy is deleted and
   * fetched again, and `model.discarded` says why.
   */
  sha256?: string | string[];
  /** Speculative decoding: "ngram" drafts tokens by prompt lookup, checked by the model in one batched step. */
  draft?: "" | "ngram";
  /**
   * Tokens one forward step processes at most, decode rows and prompt chunks together (vLLM's max_num_batched_tokens;
   * 1..8192; 0, the default: 512 on WebGPU, 128 on the CPU, or maxSeqs if larger). Fewer lower the activations' memory;
   * more read a long prompt in fewer steps.
   */
  maxBatchTokens?: number;
  /** Sequences that run at once, a row of logits each a step (vLLM's max_num_seqs; 1..256; 0, the default: 64). */
  maxSeqs?: number;
  /**
   * Ask the GPU device for this maxStorageBufferBindingSize (bytes) instead of the adapter's,
   * to try a model on the limit of a smaller GPU (WebGPU's default is 128 MiB). The engine splits
   * weights that do not fit one binding.
   */
  maxStorageBinding?: number;
  /**
   * Check the WebGPU kernels against the CPU at load (default true): a small twin of the model runs on both, and
   * kernels that disagree (a faulty driver) are replaced by plainer ones, or the engine runs on the CPU;
   * `model.selfCheck` reports it. Results are kept in the origin's storage per adapter and driver.
   */
  selfCheck?: boolean;
  /**
   * Testing: perturb every output of this kernel variant (as `model.selfCheck.kernels` names them), as a
   * miscompiling driver would, to see the self-check catch it.
   */
  kernelFault?: string;
  /**
   * A vision projector (an mmproj GGUF, as llama.cpp's `--mmproj` takes; Gemma 3's): a URL (cached as models are),
   * `{url, sha256, cache}`, a File or Blob, or an ArrayBuffer. The engine then takes images in chat messages
   * (`image_url` parts with data URLs of PNG, JPEG or WebP), and `model.vision` is true.
   */
  projector?: string | URL | File | Blob | ArrayBuffer | { url: string | URL; sha256?: string; cache?: boolean };
  onProgress?: (p: Progress) => void;
  signal?: AbortSignal;
  /** Where worker.js and tessera.wasm are, if not next to this module. */
  worker?: string | URL;
  wasm?: string | URL;
}

export interface ModelInfo {
  name: string; size: number; arch: string; params: number; layers: number; dim: number;
  heads: number; kvHeads: number; vocab: number; context: number; modelContext: number;
  quant: string; weightBytes: number; kvType: "f32" | "f16" | "int8"; kvBytes: number; backend: "webgpu" | "cpu";
  /** Of kvBytes, what the sliding-window layers' rings take (each running sequence keeps only its window there); 0 where every layer keeps every position. */
  kvWindowBytes: number;
  /** The kernels that run: "f32" on WebGPU (every kernel computes in f32; `adapter.shaderF16` says whether f16 kernels could), "f32+subgroups" where the adapter has subgroups and the reductions use them, "+f16" added once a kernel ran in f16 (f16 weights or cache on an adapter with shader-f16), "cpu" on the CPU. */
  path: "f32" | "f32+subgroups" | "f32+f16" | "f32+subgroups+f16" | "cpu";
  /** The engine's budgets, defaults filled in and capped by the context. */
  maxBatchTokens: number; maxSeqs: number;
  chatTemplate: boolean; bos: number; eos: number; cached?: boolean;
  /** The download (or the cached copy) was checked against the sha256 option. */
  verified?: boolean;
  /** Why a cached copy was deleted and fetched again (damaged, or not the published file); absent when none was. */
  discarded?: string;
  draft: "" | "ngram";
  /** Whether the engine takes images (a projector was loaded), and the projector's facts. */
  vision?: boolean;
  projector?: { name: string; size: number; type: string; imageSize: number; imageTokens: number; /** bytes the vision tower takes of the device: weights (f32), activations, attention cache */ memory: number };
  projectorUrl?: string; projectorVerified?: boolean;
  fetchMs: number; uploadMs: number; loadMs: number;
  /** The load-time check of the WebGPU kernels against the CPU; absent on the CPU backend or with selfCheck: false. */
  selfCheck?: SelfCheck;
  adapter: null | { name: string; vendor: string; architecture: string; maxStorageBufferBindingSize: number; maxBufferSize: number; shaderF16: boolean; subgroups: boolean };
}

/** What the load-time self-check found (ModelInfo.selfCheck). */
export interface SelfCheck {
  /** "passed"; "fallback": plainer kernels passed and run; "cpu": none did, the model runs on the CPU; "skipped". */
  status: "passed" | "fallback" | "cpu" | "skipped";
  adapter: string; driver: string;
  /** The plan of kernels the engine runs with. */
  plan: string;
  /** Each plan that disagreed with the CPU, and its first mismatch. */
  failed: Array<{ plan: string; error: string }>;
  /** The kernel variants checked under the plan that passed. */
  kernels: string[];
  skipped: string;
  /** Read from the origin's storage rather than run. */
  cached: boolean;
  ms: number;
}

/** What `engine.info()` reports of the engine's worker. */
export interface EngineInfo {
  version: string;
  webgpu: boolean;
  adapter?: ModelInfo["adapter"];
  /** The kernels that run on WebGPU: "f32" or "f32+subgroups" (see ModelInfo.path). */
  path?: "f32" | "f32+subgroups";
  model?: ModelInfo;
  /** The LoRA adapters loaded on the model (Engine.loadAdapter). */
  adapters?: AdapterInfo[];
  /** Bytes of the worker's wasm memory (it only grows). */
  wasmMemory: number;
  /**
   * Compute pipelines this worker has compiled. The worker keeps one GPU device for every
   * model it loads, so this stays put when a later load needs only kernels already compiled.
   */
  compiled: number;
  error?: string;
  code?: ErrorCode;
}

/** A LoRA adapter loaded on the model. */
export interface AdapterInfo {
  name: string;
  /** Its URL or file name. */
  source: string;
  format: "gguf";
  /** The largest rank of its targets. */
  rank: number;
  /** The weight matrices it adapts. */
  targets: number;
  /** The scale it was loaded with, which a request's scale multiplies. */
  scale: number;
  /** Generations using it now. */
  running: number;
  waiting: number;
  /** unloadAdapter was called while generations still used it. */
  unloading: boolean;
}

export interface MemoryEstimate {
  quant: "int4" | "f16" | "f32"; context: number;
  weights: number; kv: number; scratch: number; total: number;
  /** The biggest weight buffer: must fit the adapter's maxStorageBufferBindingSize. */
  largest: number;
}

export interface Inspection {
  name: string; size: number; arch: string; params: number; layers: number; dim: number;
  heads: number; kvHeads: number; vocab: number; modelContext: number; chatTemplate: boolean;
  memory: MemoryEstimate;
  estimates: { default: MemoryEstimate; int4: MemoryEstimate; f16: MemoryEstimate; f32: MemoryEstimate };
}

/**
 * A message of a chat, as OpenAI's Chat Completions takes it ("developer" is read as "system").
 * An assistant's tool_calls and reasoning_content, and a tool's tool_call_id, go back through the
 * model's chat template, so a reply's message can be sent back as it came.
 */
export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  /**
   * Text, or content parts: text, and images for an engine loaded with a projector (a data URL of a PNG, JPEG or
   * WebP: remote URLs are not fetched); null (or absent) for an assistant message that only calls.
   */
  content?: string | Array<{ type: "text"; text: string } | { type: "image_url"; image_url: { url: string } | string }> | null;
  tool_calls?: ToolCall[];
  /** The call a tool message answers. */
  tool_call_id?: string;
  /** What an assistant reasoned before its content (templates that render it back, such as Qwen3's, read it). */
  reasoning_content?: string;
}

/** A function the model may call: OpenAI's tool shape. */
export interface Tool {
  type: "function";
  function: {
    /** Letters, digits, _ and -, at most 64. */
    name: string;
    description?: string;
    /** A JSON Schema of the arguments object; a required call's arguments are held to it by grammar. */
    parameters?: object;
  };
}

/**
 * "auto" (the default with tools): the model may call; "none" (the default without): the tools
 * are not shown and the reply is text; "required": the reply is held to calls of the tools;
 * a named function: to a call of that one.
 */
export type ToolChoice = "auto" | "none" | "required" | { type: "function"; function: { name: string } };

/** A call a reply made. */
export interface ToolCall {
  /** Unique within the completion (and made unique beyond it); some formats' templates want a shape (Mistral's nine letters and digits). */
  id: string;
  type: "function";
  /** arguments: a JSON object, as text. */
  function: { name: string; arguments: string };
}

/** A piece of a streamed call: its first names it (index, id, type, name, empty arguments), the rest add to its arguments. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

/** The fields of a request the engine reads as Tessera's HTTP server does (runtime/chatapi): a bad one rejects with a TesseraError naming it. */
export interface SamplingParams {
  max_tokens?: number;
  max_completion_tokens?: number;
  /** Default 1; 0 is greedy. */
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
  /** -2 to 2, as OpenAI's: lower the odds of tokens by how often (frequency) or whether (presence) they came already. */
  frequency_penalty?: number;
  presence_penalty?: number;
  /** Token id (as a string) to a bias in [-100, 100] added to its logit. */
  logit_bias?: Record<string, number>;
  /** How many choices to sample (1 to 32); choice i draws with seed + i, sharing the prompt's cache. */
  n?: number;
  seed?: number;
  stop?: string | string[];
  ignore_eos?: boolean;
  /**
   * Tessera's: each choice comes with its transcript (the model's SHA-256 when it was loaded with
   * one, the prompt ids, the sampling and seed, the output ids and log-probabilities, the engine,
   * backend and system_fingerprint), which `tessera replay` runs again natively.
   */
  transcript?: boolean;
  /**
   * LoRA adapters (loaded by Engine.loadAdapter) applied to this request, as tessera serve's
   * "lora" field: several add up; scale (default 1) multiplies the adapter's own, 0 leaves it out.
   */
  lora?: Array<{ name: string; scale?: number }>;
  model?: string;
  signal?: AbortSignal;
  /**
   * Structured output, as OpenAI's API has it: the reply is masked token by token so that it is
   * valid JSON (json_object) or valid against a JSON Schema (json_schema). At most one of
   * response_format, grammar, regex and their vLLM names may be given.
   */
  response_format?: ResponseFormat;
  /** A GBNF grammar (llama.cpp's format) the reply must match. */
  grammar?: string;
  /** A regular expression the whole reply must match. */
  regex?: string;
  /** vLLM's names: a JSON Schema, a GBNF grammar, a regular expression. */
  guided_json?: object | string;
  guided_grammar?: string;
  guided_regex?: string;
}

export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; json_schema: { name?: string; schema: object; strict?: boolean } };

/** "tool_calls": the reply called (and was not cut off by max_tokens). */
export type FinishReason = "stop" | "length" | "tool_calls";

export interface Usage { prompt_tokens: number; completion_tokens: number; total_tokens: number }

/** Tessera's additions to OpenAI's shapes. */
export interface TesseraExtra {
  token_ids: number[]; prompt_ids: number[];
  /** "complete": the reply completed the grammar of response_format, grammar or regex. */
  stopped: "max" | "eos" | "stop" | "length" | "complete";
  ttft_ms: number; total_ms: number; decode_tps: number; prefill_tps: number; seed: number;
  /** Speculative decoding (draft: "ngram"): tokens drafted and accepted. */
  draft_tokens: number; accepted_tokens: number;
}

/** A token's log-probability and its most likely alternatives, as OpenAI's chat logprobs (bytes: its UTF-8 bytes). */
export interface TokenLogprob {
  token: string; logprob: number; bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

/** The completions API's logprobs: parallel arrays. */
export interface CompletionLogprobs {
  tokens: string[]; token_logprobs: number[]; top_logprobs: Array<Record<string, number>>; text_offset: number[];
}

/** A generation written down (runtime.Transcript), for `tessera replay`. */
export interface Transcript {
  version: number; engine: string; backend: string; system_fingerprint: string;
  model: { name: string; sha256?: string; weights?: string };
  prompt: number[]; max_tokens: number; output: number[]; logprobs: number[]; finish: string;
  [field: string]: unknown;
}

export interface ChatCompletion {
  id: string; object: "chat.completion"; created: number; model: string;
  /** Names the engine's version, device and storage: what the reproducibility contract binds. */
  system_fingerprint?: string;
  choices: Array<{ index: number; message: AssistantMessage; finish_reason: FinishReason; logprobs: { content: TokenLogprob[] } | null; transcript?: Transcript }>;
  usage: Usage;
  tessera: TesseraExtra;
}

/** A chat reply, split as the model's format writes it (Qwen3's <think>, its <tool_call> blocks, …). */
export interface AssistantMessage {
  role: "assistant";
  /** The reply's text ("" when it only called; trimmed around calls). */
  content: string;
  /** The reasoning, where the model's template has it (llama-server's and vLLM's field). */
  reasoning_content?: string;
  tool_calls?: ToolCall[];
}

/**
 * Each chunk's delta holds one piece of the reply as it is read: reasoning_content, content, or a
 * tool call's (the call's name as soon as it is known, its arguments as they are generated).
 * A token that completes no piece (a marker) still has its chunk, with content "".
 */
export interface ChatCompletionChunk {
  id: string; object: "chat.completion.chunk"; created: number; model: string;
  choices: Array<{
    index: number;
    delta: { role?: "assistant"; content?: string; reasoning_content?: string; tool_calls?: ToolCallDelta[] };
    logprobs: { content: TokenLogprob[] } | null;
    finish_reason: FinishReason | null;
    /** With transcript: true, on the choice's last chunk. */
    transcript?: Transcript;
  }>;
  /** On the last chunk only. */
  usage?: Usage;
  tessera?: Partial<TesseraExtra> & { token_id?: number };
}

export interface Completion {
  id: string; object: "text_completion"; created: number; model: string;
  system_fingerprint?: string;
  choices: Array<{ index: number; text: string; finish_reason: FinishReason; logprobs: CompletionLogprobs | null; transcript?: Transcript }>;
  usage: Usage;
  tessera: TesseraExtra;
}

export interface CompletionChunk {
  id: string; object: "text_completion"; created: number; model: string;
  choices: Array<{ index: number; text: string; logprobs: CompletionLogprobs | null; finish_reason: FinishReason | null }>;
  usage?: Usage;
  tessera?: Partial<TesseraExtra> & { token_id?: number };
}

export interface GenerationStats {
  promptTokens: number; promptIds: number[]; generated: number; ttftMs: number; totalMs: number;
  decodeTps: number; prefillTps: number; stopped: string; finishReason: string; seed: number;
  /** A chat's reply, split (the low-level generate's result for {messages}). */
  reasoning?: string; content?: string; toolCalls?: ToolCall[];
  /** Speculative decoding: draft tokens proposed and accepted. */
  drafted: number; accepted: number;
  /** Every choice's figures, with n > 1. */
  choices?: GenerationStats[];
}

/**
 * A piece of a chat reply as the low-level generate reads it (Tessera.generate's onToken
 * gets {text, id, index, events}); a call's id is already the one its ToolCall will have.
 */
export type ReplyEvent =
  | { kind: "reasoning" | "text"; text: string }
  | { kind: "call"; call: number; name: string; id: string }
  | { kind: "args"; call: number; text: string };

/** The iterator stream: true returns. Breaking out of a for-await loop stops the generation. */
export interface Stream<T> extends AsyncIterable<T> {
  abort(): void;
  /** The engine's figures, once the last chunk is out. */
  readonly stats: GenerationStats | null;
}

/** The chat's own fields, read and checked as Tessera's HTTP server reads them; a malformed one rejects with code "bad-request". */
export interface ChatFields {
  messages: ChatMessage[];
  tools?: Tool[];
  tool_choice?: ToolChoice;
  /** Default true: a reply held to calls may make up to 8, where the model's format has room for more than one. */
  parallel_tool_calls?: boolean;
  /** Further variables of the chat template, e.g. {enable_thinking: false} for Qwen3. */
  chat_template_kwargs?: Record<string, unknown>;
  /** Reaches the template as reasoning_effort (gpt-oss's). */
  reasoning_effort?: "minimal" | "low" | "medium" | "high";
}

export interface ChatCompletionParams extends SamplingParams, ChatFields {
  stream?: boolean;
  /** Each generated token's log-probability (logprobs.content), with top_logprobs (0 to 20) alternatives. */
  logprobs?: boolean;
  top_logprobs?: number;
}
export interface CompletionParams extends SamplingParams {
  prompt: string | number[];
  stream?: boolean;
  /** Each token's log-probability with this many (0 to 20) alternatives, in the completions API's arrays. */
  logprobs?: number;
}

export interface EmbeddingParams {
  input: string | string[] | number[] | number[][];
  model?: string;
  encoding_format?: "float" | "base64";
  /** Keep the leading values, normalised again (Matryoshka models). */
  dimensions?: number;
}
export interface EmbeddingResponse {
  object: "list";
  data: Array<{ object: "embedding"; index: number; embedding: number[] | string }>;
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

export interface Engine {
  readonly model: ModelInfo | null;
  /** With an embedding model (BERT-family GGUF, or a decoder with a pooling type) loaded. */
  readonly embeddings: { create(p: EmbeddingParams): Promise<EmbeddingResponse> };
  readonly chat: {
    completions: {
      create(p: ChatCompletionParams & { stream: true }): Promise<Stream<ChatCompletionChunk>>;
      create(p: ChatCompletionParams & { stream?: false }): Promise<ChatCompletion>;
    };
  };
  readonly completions: {
    create(p: CompletionParams & { stream: true }): Promise<Stream<CompletionChunk>>;
    create(p: CompletionParams & { stream?: false }): Promise<Completion>;
  };
  /**
   * The ids of text (bos: true, special: false by default), or of the prompt a chat makes with the
   * chat template (its tools, and a required call's opening, as create runs it).
   */
  tokenize(input: string | ChatFields | { prompt: string }, options?: { bos?: boolean; special?: boolean }): Promise<number[]>;
  detokenize(ids: number[]): Promise<string>;
  load(model: ModelSource, options?: Omit<EngineOptions, "model" | "worker" | "wasm">): Promise<ModelInfo>;
  info(): Promise<EngineInfo>;
  /**
   * Reads a LoRA adapter of the loaded model (a GGUF LoRA, as llama.cpp's convert_lora_to_gguf
   * writes it) under name, checked against the model's shapes; requests apply it with lora.
   * It goes with the model: load and unload drop it.
   */
  loadAdapter(name: string, adapter: string | URL | Blob | ArrayBuffer, options?: { scale?: number; cache?: boolean }): Promise<AdapterInfo>;
  /** Frees an adapter once the requests using it end. */
  unloadAdapter(name: string): Promise<void>;
  /** Frees the model and ends the engine's worker. */
  unload(): Promise<void>;
}

export function createEngine(options?: EngineOptions): Promise<Engine>;
/** A model's description and memory needs from its header alone (a URL by range requests). */
export function inspect(model: ModelSource, options?: { quant?: string; context?: number; device?: string }): Promise<Inspection>;
export function cached(): Promise<Array<{ url: string; size: number; hash: string; saved: string }>>;
export function clearCache(): Promise<{ removed: number; bytes: number }>;

/** The low-level client over the worker protocol (see client.js). */
export class Tessera {
  constructor(workerURL?: string | URL);
  readonly ready: Promise<string>;
  terminate(): void;
  [op: string]: unknown;
}
