// The SDK over real pipes: the example extension answers initialize with its manifest and
// services, runs a tool with streamed output, and answers an unknown method with -32601.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const example = fileURLToPath(new URL("../examples/loopback_engine.js", import.meta.url));

function start() {
  const child = spawn(process.execPath, [example], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! });
  const received: any[] = [];
  const waiters: Array<() => void> = [];
  lines.on("line", (line) => {
    received.push(JSON.parse(line));
    waiters.splice(0).forEach((wake) => wake());
  });
  const send = (message: object) => child.stdin!.write(JSON.stringify(message) + "\n");
  const until = async (found: (m: any) => boolean) => {
    while (!received.some(found)) await new Promise<void>((wake) => waiters.push(wake));
    return received.find(found);
  };
  return { child, send, until, received };
}

test("initialize announces the manifest and the services", async () => {
  const ext = start();
  ext.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "1", workspace: "/" } });
  const answer = await ext.until((m) => m.id === 1);
  assert.equal(answer.result.manifest.id, "ts-loopback");
  assert.equal(answer.result.manifest.api_version, "0.1.0");
  assert.deepEqual(answer.result.manifest.provides, [{ ToolProvider: "ts-loopback" }, { InferenceEngine: "ts-loopback" }]);
  assert.deepEqual(answer.result.manifest.required_capabilities, [{ id: "network.loopback" }]);
  assert.equal(answer.result.services.tools[0].name, "reverse_text");
  assert.equal(answer.result.services.inferenceEngines[0].defaultModel, "loopback-model");
  ext.child.stdin!.end();
});

test("a tool call streams output and answers; an unknown method is -32601", async () => {
  const ext = start();
  ext.send({ jsonrpc: "2.0", id: 2, method: "tool/execute", params: { tool: "reverse_text", callId: "c1", arguments: { text: "abc" } } });
  const answer = await ext.until((m) => m.id === 2);
  assert.deepEqual(answer.result, { text: "cba" });
  assert.deepEqual(ext.received[0], { jsonrpc: "2.0", method: "tool/output", params: { callId: "c1", text: "reversing 3 characters\n" } });
  ext.send({ jsonrpc: "2.0", id: 3, method: "no/such", params: {} });
  assert.equal((await ext.until((m) => m.id === 3)).error.code, -32601);
  ext.child.stdin!.end();
});
