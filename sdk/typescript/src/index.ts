/**
 * Write a Roder extension in TypeScript (docs/extension-protocol.md).
 *
 * Declare services on an `Extension`, then call `run()`: the SDK speaks the protocol on stdin and
 * stdout (one JSON-RPC message per line), answers calls concurrently, aborts a call's signal when
 * Roder cancels it, and keeps stdout for protocol lines (log with console.error).
 *
 *   const ext = new Extension({ id: "acme", name: "Acme", version: "0.1.0" });
 *   ext.tool({ name: "shout", description: "Upper-case a text.", inputSchema: {...} },
 *            async (args, ctx) => String(args.text).toUpperCase());
 *   ext.run();
 */
import { createInterface } from "node:readline";

export const API_VERSION = "0.1.0";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** Throw from a handler to fail its call with this message (code -32000). */
export class ExtensionError extends Error {}

export interface ToolSpec {
  name: string;
  description: string;
  inputSchema?: JsonObject;
  readOnly?: boolean;
}

export interface ToolResult {
  text: string;
  isError?: boolean;
  data?: Json;
}

export interface ToolContext {
  callId: string;
  threadId: string;
  workspace: string;
  /** Aborted when Roder cancels the call. */
  signal: AbortSignal;
  /** Stream text to the call's tool card while it runs. */
  output(text: string): void;
}

/** Canonical events of one model call. */
export type InferenceEvent =
  | { type: "message_delta"; text: string }
  | { type: "reasoning_delta"; text: string; summary?: boolean }
  | { type: "tool_call"; callId: string; name: string; arguments: JsonObject }
  | { type: "usage"; usage: { inputTokens: number; outputTokens: number; cachedInputTokens?: number } }
  | { type: "completed"; stopReason: "end_turn" | "tool_use" | "max_tokens" | "refusal" | "cancelled" | "error" | "other" }
  | { type: "error"; message: string; kind?: string; retryable?: boolean };

export interface EngineStream {
  streamId: string;
  signal: AbortSignal;
  emit(event: InferenceEvent): void;
}

export interface ModelProfile {
  id: string;
  contextWindow?: number;
  maxOutputTokens?: number;
  reasoning?: boolean;
  images?: boolean;
}

export interface HookOutcome {
  block?: boolean;
  reason?: string;
  replace?: JsonObject;
}

export interface PolicyAnswer {
  verdict: "allow" | "ask" | "deny" | null;
  reason?: string;
}

type Awaitable<T> = T | Promise<T>;
type ToolHandler = (args: JsonObject, ctx: ToolContext) => Awaitable<string | ToolResult>;
type EngineHandler = (request: JsonObject, stream: EngineStream) => Awaitable<void>;

interface Manifest {
  id: string;
  name: string;
  version: string;
  description?: string;
  capabilities?: string[];
}

export class Extension {
  private tools = new Map<string, { spec: ToolSpec; handler: ToolHandler }>();
  private hooks = new Map<string, { points: string[]; handler: (point: string, payload: JsonObject) => Awaitable<HookOutcome | null> }>();
  private engines = new Map<string, { row: JsonObject; handler: EngineHandler }>();
  private context = new Map<string, (query: JsonObject) => Awaitable<JsonObject[]>>();
  private policies = new Map<string, (tool: string, args: JsonObject, mode: string) => Awaitable<PolicyAnswer | null>>();
  private segments = new Map<string, (state: JsonObject) => Awaitable<{ text: string; priority?: number } | null>>();
  private palettes = new Map<string, (state: JsonObject) => Awaitable<JsonObject[]>>();
  private running = new Map<Json, AbortController>();

  constructor(private readonly info: Manifest) {}

  tool(spec: ToolSpec, handler: ToolHandler): this {
    this.tools.set(spec.name, { spec, handler });
    return this;
  }

  hook(id: string, points: string[], handler: (point: string, payload: JsonObject) => Awaitable<HookOutcome | null>): this {
    this.hooks.set(id, { points, handler });
    return this;
  }

  engine(id: string, models: ModelProfile[], handler: EngineHandler, name?: string): this {
    const row = { id, name: name ?? id, models: models as unknown as Json[], defaultModel: models[0]?.id ?? "" };
    this.engines.set(id, { row, handler });
    return this;
  }

  contextProvider(id: string, handler: (query: JsonObject) => Awaitable<JsonObject[]>): this {
    this.context.set(id, handler);
    return this;
  }

  policy(id: string, handler: (tool: string, args: JsonObject, mode: string) => Awaitable<PolicyAnswer | null>): this {
    this.policies.set(id, handler);
    return this;
  }

  statusSegment(id: string, handler: (state: JsonObject) => Awaitable<{ text: string; priority?: number } | null>): this {
    this.segments.set(id, handler);
    return this;
  }

  paletteSource(id: string, handler: (state: JsonObject) => Awaitable<JsonObject[]>): this {
    this.palettes.set(id, handler);
    return this;
  }

  /** Seed 003's manifest, as the initialize answer carries it. */
  manifest(): JsonObject {
    const provides: JsonObject[] = this.tools.size ? [{ ToolProvider: this.info.id }] : [];
    for (const id of this.hooks.keys()) provides.push({ Hook: id });
    for (const id of this.engines.keys()) provides.push({ InferenceEngine: id });
    for (const id of this.context.keys()) provides.push({ ContextProvider: id });
    for (const id of this.policies.keys()) provides.push({ PolicyContributor: id });
    for (const id of this.segments.keys()) provides.push({ StatusSegment: id });
    for (const id of this.palettes.keys()) provides.push({ PaletteSource: id });
    return {
      id: this.info.id,
      name: this.info.name,
      version: this.info.version,
      api_version: API_VERSION,
      description: this.info.description ?? null,
      provides,
      required_capabilities: (this.info.capabilities ?? []).map((id) => ({ id })),
    };
  }

  private initialize(): JsonObject {
    const ids = (m: Map<string, unknown>): JsonObject[] => [...m.keys()].map((id) => ({ id }));
    return {
      manifest: this.manifest(),
      services: {
        tools: [...this.tools.values()].map(({ spec }) => ({
          name: spec.name,
          description: spec.description,
          inputSchema: spec.inputSchema ?? { type: "object", properties: {} },
          readOnly: spec.readOnly ?? false,
        })),
        hooks: [...this.hooks.entries()].map(([id, h]) => ({ id, points: h.points })),
        inferenceEngines: [...this.engines.values()].map((e) => e.row),
        contextProviders: ids(this.context),
        policyContributors: ids(this.policies),
        statusSegments: ids(this.segments),
        paletteSources: ids(this.palettes),
      },
    };
  }

  private send(message: JsonObject): void {
    process.stdout.write(JSON.stringify(message) + "\n");
  }

  private lookup<T>(table: Map<string, T>, key: Json | undefined, what: string): T {
    const found = table.get(String(key));
    if (found === undefined) throw new LookupError(`unknown ${what} ${String(key)}`);
    return found;
  }

  private async route(method: string, params: JsonObject, signal: AbortSignal): Promise<Json> {
    switch (method) {
      case "initialize":
        return this.initialize();
      case "tool/execute": {
        const { handler } = this.lookup(this.tools, params.tool, "tool");
        const callId = String(params.callId);
        const ctx: ToolContext = {
          callId,
          threadId: String(params.threadId ?? ""),
          workspace: String(params.workspace ?? process.cwd()),
          signal,
          output: (text) => this.send({ jsonrpc: "2.0", method: "tool/output", params: { callId, text } }),
        };
        const result = await handler((params.arguments ?? {}) as JsonObject, ctx);
        return (typeof result === "string" ? { text: result } : result) as unknown as Json;
      }
      case "hook/run":
        return ((await this.lookup(this.hooks, params.hook, "hook").handler(String(params.point), (params.payload ?? {}) as JsonObject)) ??
          null) as unknown as Json;
      case "engine/stream": {
        const streamId = String(params.streamId);
        const stream: EngineStream = {
          streamId,
          signal,
          emit: (event) => this.send({ jsonrpc: "2.0", method: "engine/event", params: { streamId, event: event as unknown as Json } }),
        };
        await this.lookup(this.engines, params.engine, "engine").handler(params.request as JsonObject, stream);
        return {};
      }
      case "context/load":
        return { blocks: await this.lookup(this.context, params.provider, "context provider")((params.query ?? {}) as JsonObject) };
      case "policy/review":
        return ((await this.lookup(this.policies, params.contributor, "policy contributor")(
          String(params.tool),
          (params.arguments ?? {}) as JsonObject,
          String(params.mode ?? ""),
        )) ?? null) as unknown as Json;
      case "status/render":
        return ((await this.lookup(this.segments, params.segment, "status segment")((params.state ?? {}) as JsonObject)) ??
          null) as unknown as Json;
      case "palette/commands":
        return { commands: await this.lookup(this.palettes, params.source, "palette source")((params.state ?? {}) as JsonObject) };
      default:
        throw new LookupError(`unknown method ${method}`);
    }
  }

  private async answer(id: Json, method: string, params: JsonObject): Promise<void> {
    const controller = new AbortController();
    this.running.set(id, controller);
    try {
      const result = await this.route(method, params, controller.signal);
      if (!controller.signal.aborted) this.send({ jsonrpc: "2.0", id, result });
    } catch (error) {
      if (controller.signal.aborted) return; // Roder cancelled it and ignores any answer now
      const code = error instanceof LookupError ? -32601 : -32000;
      const message = error instanceof Error ? (error instanceof ExtensionError ? error.message : `${error.name}: ${error.message}`) : String(error);
      this.send({ jsonrpc: "2.0", id, error: { code, message } });
    } finally {
      this.running.delete(id);
    }
  }

  /** Serve until Roder closes stdin. */
  run(): void {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    lines.on("line", (line) => {
      if (!line.trim()) return;
      const message = JSON.parse(line) as JsonObject;
      const method = message.method;
      const params = (message.params ?? {}) as JsonObject;
      if (method === "$/cancelRequest") {
        this.running.get(params.id ?? null)?.abort();
      } else if (typeof method === "string" && message.id !== undefined) {
        void this.answer(message.id, method, params);
      }
    });
    lines.on("close", () => {
      for (const controller of this.running.values()) controller.abort();
      process.exit(0);
    });
  }
}

class LookupError extends Error {}
