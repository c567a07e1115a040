/**
 * An extension in TypeScript that provides an inference engine and a tool.
 *
 * The engine turns Roder's canonical request into a Chat Completions request to the server at
 * MODEL_BASE_URL (granted `network.loopback` for a server on this machine), streams the answer
 * back as canonical events, and leaves the agent loop, tools and approvals to Roder. The tool
 * reverses a text. Run by Roder as:
 *
 *   [extensions.process.ts-loopback]
 *   command = ["node", "sdk/typescript/dist/examples/loopback_engine.js"]
 *   capabilities = ["network.loopback"]
 *   env = { MODEL_BASE_URL = "http://127.0.0.1:8080/v1" }
 */
import { Extension, type EngineStream, type JsonObject } from "../src/index.js";

const ext = new Extension({
  id: "ts-loopback",
  name: "Loopback engine (TypeScript)",
  version: "0.1.0",
  description: "A Chat Completions engine and a text tool, outside Python",
  capabilities: ["network.loopback"],
});

ext.tool(
  {
    name: "reverse_text",
    description: "Reverse a text, character by character.",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    readOnly: true,
  },
  async (args, ctx) => {
    ctx.output(`reversing ${String(args.text).length} characters\n`);
    return [...String(args.text)].reverse().join("");
  },
);

type Part = { type: string; text?: string; callId?: string; name?: string; arguments?: JsonObject };
type Message = { role: "user" | "assistant" | "tool"; parts: Part[] };

/** Canonical messages as Chat Completions messages. */
function chatMessages(request: JsonObject): JsonObject[] {
  const out: JsonObject[] = request.system ? [{ role: "system", content: String(request.system) }] : [];
  for (const message of (request.messages ?? []) as unknown as Message[]) {
    const text = message.parts.filter((p) => p.type === "text").map((p) => p.text ?? "").join("");
    if (message.role === "tool") {
      for (const part of message.parts.filter((p) => p.type === "tool_result")) {
        out.push({ role: "tool", tool_call_id: part.callId ?? "", content: part.text ?? "" });
      }
    } else if (message.role === "assistant") {
      const calls = message.parts
        .filter((p) => p.type === "tool_call")
        .map((p) => ({ id: p.callId ?? "", type: "function", function: { name: p.name ?? "", arguments: JSON.stringify(p.arguments ?? {}) } }));
      out.push(calls.length ? { role: "assistant", content: text || null, tool_calls: calls } : { role: "assistant", content: text });
    } else {
      out.push({ role: "user", content: text });
    }
  }
  return out;
}

const STOP: Record<string, "end_turn" | "tool_use" | "max_tokens"> = { stop: "end_turn", tool_calls: "tool_use", length: "max_tokens" };

async function complete(request: JsonObject, stream: EngineStream): Promise<void> {
  const base = process.env.MODEL_BASE_URL ?? "http://127.0.0.1:8080/v1";
  const tools = ((request.tools ?? []) as JsonObject[]).map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
  const body = { model: request.model, messages: chatMessages(request), stream: true, stream_options: { include_usage: true }, ...(tools.length ? { tools } : {}) };
  const response = await fetch(`${base}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body),
    signal: stream.signal,
  });
  if (!response.ok || !response.body) {
    stream.emit({ type: "error", message: `the model server answered HTTP ${response.status}`, kind: "provider" });
    return;
  }
  const calls = new Map<number, { id: string; name: string; args: string }>();
  let stop: "end_turn" | "tool_use" | "max_tokens" = "end_turn";
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end).trim();
      buffer = buffer.slice(end + 1);
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") continue;
      const event = JSON.parse(data);
      if (event.usage) {
        stream.emit({ type: "usage", usage: { inputTokens: event.usage.prompt_tokens ?? 0, outputTokens: event.usage.completion_tokens ?? 0 } });
      }
      const choice = event.choices?.[0];
      if (!choice) continue;
      if (choice.delta?.content) stream.emit({ type: "message_delta", text: choice.delta.content });
      for (const call of choice.delta?.tool_calls ?? []) {
        const seen = calls.get(call.index) ?? { id: "", name: "", args: "" };
        seen.id = call.id ?? seen.id;
        seen.name = call.function?.name ?? seen.name;
        seen.args += call.function?.arguments ?? "";
        calls.set(call.index, seen);
      }
      if (choice.finish_reason) stop = STOP[choice.finish_reason] ?? "end_turn";
    }
  }
  for (const call of calls.values()) {
    stream.emit({ type: "tool_call", callId: call.id, name: call.name, arguments: call.args ? JSON.parse(call.args) : {} });
  }
  stream.emit({ type: "completed", stopReason: calls.size ? "tool_use" : stop });
}

ext.engine("ts-loopback", [{ id: "loopback-model", contextWindow: 32000 }], complete, "Loopback (TypeScript)");
ext.run();
